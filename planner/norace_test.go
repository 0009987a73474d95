//go:build !race

package planner

// raceDetector: the race detector is off.
const raceDetector = false
