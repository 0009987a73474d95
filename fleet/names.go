package fleet

import "github.com/gantry-dev/gantry/internal/randid"

// machineIDChars random characters (60 bits) end every machine id: a
// fleet of a million machines collides with odds of about one in two
// million, and a collision fails the intent's insert instead of
// overwriting a machine (the act step retries with another id).
const machineIDChars = 12

// NewMachineID is readable and unique: cluster, group and a random
// suffix.
func NewMachineID(cluster, group string) string {
	return cluster + "-" + group + "-" + randid.Base32(machineIDChars)
}
