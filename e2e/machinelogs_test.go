package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// machineLogTail is how many lines of each log a failed test prints.
const machineLogTail = 40

// machineLogs is the end of every log the local machines of dataDir
// left (each agent's, and each replica's output and previous output), so
// a failure says what the agents and their replicas did, not only what
// the server saw.
func machineLogs(dataDir string) string {
	var b strings.Builder
	root := filepath.Join(dataDir, "local", "machines")
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		switch d.Name() {
		case "agent.log", "output.log", "previous.log":
		default:
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || len(data) == 0 {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		fmt.Fprintf(&b, "--- %s (last %d lines)\n%s\n", rel, machineLogTail, lastLogLines(string(data), machineLogTail))
		return nil
	})
	return b.String()
}

func lastLogLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
