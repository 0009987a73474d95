//go:build race

package planner

// raceDetector: the race detector is on (see the quality suite).
const raceDetector = true
