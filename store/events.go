package store

import (
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Record adds an event in the transaction.
func Record(tx Tx, eventType, reason, objectKind, objectName, format string, args ...any) error {
	return tx.AddEvent(&api.Event{
		Time: time.Now().UTC(), Type: eventType, Reason: reason,
		ObjectKind: objectKind, ObjectName: objectName, Message: fmt.Sprintf(format, args...),
	})
}
