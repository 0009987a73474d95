package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// usageError is a command called wrongly (arguments, flags, an unknown
// command): printed with the command's usage line and first example, as
// kubectl does, so the fix is on the screen.
type usageError struct {
	cmd *cobra.Command
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// exitCode ends the CLI with a status and, when err is set, its message
// (a silent one for `diff`'s "there are differences").
type exitCode struct {
	code int
	err  error
}

func (e *exitCode) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitCode) Unwrap() error { return e.err }

// markUsageErrors makes every argument and flag error of cmd's tree a
// usageError.
func markUsageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{cmd: c, err: err} })
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return &usageError{cmd: c, err: argumentError(c, args, err)}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markUsageErrors(sub)
	}
}

// argumentError rewords an unknown subcommand with cobra's suggestions
// on one line ("did you mean …?"), and leaves other errors as they are.
func argumentError(c *cobra.Command, args []string, err error) error {
	if !c.HasSubCommands() || len(args) == 0 || !strings.HasPrefix(err.Error(), "unknown command") {
		return err
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if suggestions := c.SuggestionsFor(args[0]); len(suggestions) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", strings.Join(suggestions, `" or "`))
	}
	return errors.New(msg)
}

// printError writes err the way the CLI reports failures, and returns
// the process's exit status.
func printError(w io.Writer, root *cobra.Command, err error) int {
	var exit *exitCode
	if errors.As(err, &exit) {
		if exit.err != nil {
			fmt.Fprintln(w, "error: "+oneLine(exit.err.Error()))
		}
		return exit.code
	}
	var usage *usageError
	if !errors.As(err, &usage) {
		if unknown, ok := unknownRootCommand(root, err); ok {
			usage = &usageError{cmd: root, err: unknown}
		}
	}
	if usage == nil {
		fmt.Fprintln(w, "error: "+oneLine(err.Error()))
		return 1
	}
	fmt.Fprintln(w, "error: "+oneLine(usage.err.Error()))
	use := usage.cmd.UseLine()
	if usage.cmd.HasAvailableSubCommands() {
		use = usage.cmd.CommandPath() + " COMMAND [flags]"
	}
	fmt.Fprintln(w, "Usage: "+use)
	if ex := firstExample(usage.cmd); ex != "" {
		fmt.Fprintln(w, "Example:\n"+ex)
	}
	fmt.Fprintf(w, "See '%s --help' for more.\n", usage.cmd.CommandPath())
	return 1
}

// unknownRootCommand is cobra's own "unknown command" of the root (found
// before any Args check runs), with its suggestions on one line.
func unknownRootCommand(root *cobra.Command, err error) (error, bool) {
	name, ok := strings.CutPrefix(err.Error(), "unknown command \"")
	if !ok {
		return nil, false
	}
	name, _, _ = strings.Cut(name, "\"")
	return argumentError(root, []string{name}, err), true
}

// firstExample is the first example of a command's help (its comment
// line and command), indented.
func firstExample(c *cobra.Command) string {
	var lines []string
	for _, line := range strings.Split(strings.Trim(c.Example, "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			if len(lines) > 0 {
				break
			}
			continue
		}
		lines = append(lines, line)
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			break
		}
	}
	return strings.Join(lines, "\n")
}
