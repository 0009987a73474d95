package store

import (
	"fmt"
	"time"

	"github.com/gantry-dev/gantry/api"
)

// Record adds an event, at now, in the transaction.
func Record(tx Tx, now time.Time, eventType, reason, objectKind, objectName, format string, args ...any) error {
	return tx.AddEvent(&api.Event{
		Time: now.UTC(), Type: eventType, Reason: reason,
		ObjectKind: objectKind, ObjectName: objectName, Message: fmt.Sprintf(format, args...),
	})
}
