// Command dagflow runs and operates dagflow workflow engines.
//
//	dagflow dev                          the example workflows and the HTTP API in one process, no servers
//	                                     (miniredis + SQLite): an order every second until Ctrl-C
//	dagflow dev --once                   a batch of orders, every step printed; exits when all are finished
//	dagflow serve                        an engine node with the HTTP API, until SIGINT/SIGTERM
//	                                     (--workflows DIR: YAML workflows too, kind: http steps without Go code)
//	dagflow worker                       an engine node on Redis + MySQL, until SIGINT/SIGTERM
//	dagflow migrate                      apply the schema migrations to a MySQL database
//	dagflow workflows [list]             the workflows whose definitions are stored
//	dagflow workflows show NAME          a workflow's steps, versions and graph (Mermaid)
//	dagflow trigger WORKFLOW             start a run (--input JSON|@FILE, --key K) and print its id
//	dagflow runs [list]                  list runs, newest first
//	dagflow runs show RUN_ID             a run with its steps and history
//	dagflow runs purge --before DATE     delete runs finished before DATE (--dry-run: count only)
//	dagflow dlq [list]                   the dead-letter queue
//	dagflow dlq retry|discard RUN_ID STEP
//	dagflow schedules [list]             the schedules, their next fire time and last tick
//	dagflow schedules pause|resume|trigger NAME
//	dagflow nodes                        the engine nodes: live and recently dead, with their status
//	dagflow apikeys [list]               the HTTP API's keys (never their secrets)
//	dagflow apikeys create --scope S --name N, apikeys revoke ID|NAME
//	dagflow bench                        end-to-end throughput of the order workflow
//	dagflow completion SHELL             a completion script for bash, zsh, fish or powershell
//	dagflow version                      the module version and VCS revision (also --version)
//
// Every command takes -h for its flags. Flags may come before or after the
// arguments; an unknown command, flag or argument is a usage error (exit
// status 2), any other failure exits 1. The Go-style single-dash spelling
// of a long flag (-mysql-dsn) is still accepted.
//
// Connection settings also come from the environment; a flag wins over its
// variable. The *_FILE forms read the value from a file (trimmed), so that
// a secret is neither on the command line (visible in ps) nor in the
// environment:
//
//	DAGFLOW_MYSQL_DSN, DAGFLOW_MYSQL_DSN_FILE           --mysql-dsn, --mysql-dsn-file
//	DAGFLOW_MYSQL_TLS_CA, _CERT, _KEY                   --mysql-tls-ca, --mysql-tls-cert, --mysql-tls-key
//	DAGFLOW_REDIS_URL, DAGFLOW_REDIS_URL_FILE           --redis-url, --redis-url-file
//	DAGFLOW_REDIS_ADDR                                  --redis-addr (host:port, no credentials)
//	DAGFLOW_PREFIX                                      --prefix
//	DAGFLOW_SQLITE                                      --sqlite
//
// Redis URLs are redis://, rediss:// (TLS with a private CA and a client
// certificate), redis+sentinel:// and redis+cluster://; `dagflow worker
// -h` lists their forms.
//
// Secrets are not printed: help shows which variable a setting comes from,
// not its value, and every message, including the logs of the Redis and
// MySQL drivers, has the passwords of the DSN and URL replaced by "xxxxx".
// Text read from the store (run and step errors, outputs, names) is printed
// with its control characters escaped, so a step error cannot drive the
// terminal (see escape.go).
//
// Building with -tags nodev leaves out the dev and bench commands and
// --sqlite, so that a production binary links neither miniredis nor SQLite.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dagflow/dagflow/internal/buildinfo"
)

// defaultGCPercent is the garbage collector's target when GOGC is not set.
// The engine's live heap is small (tens of MiB) and mostly short-lived
// batch garbage, so at the default of 100 the collector takes about a
// quarter of the process's CPU under load; 400 trades a few tens of MiB of
// heap for most of that CPU.
const defaultGCPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go watchSignals(sigs, cancel, os.Stderr, os.Exit)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// watchSignals cancels the command's context on the first signal (a
// graceful stop) and exits at once on the second.
func watchSignals(sigs <-chan os.Signal, cancel context.CancelFunc, stderr io.Writer, exit func(int)) {
	s, ok := <-sigs
	if !ok {
		return
	}
	// Said before the stop begins: a quick stop may end the process
	// before this goroutine runs again.
	fmt.Fprintf(stderr, "dagflow: %v: stopping; a second signal exits at once\n", s)
	cancel()
	if s, ok = <-sigs; !ok {
		return
	}
	fmt.Fprintf(stderr, "dagflow: %v again: exiting now\n", s)
	exit(signalExitCode(s))
}

// signalExitCode is the shell's status of a process killed by s: 128+n.
func signalExitCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// usageError is a command line that does not make sense: exit status 2.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// run runs the dagflow command line args and returns its exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sec := &secrets{}
	helpOut := stdout
	stdout, stderr = sec.writer(stdout), sec.writer(stderr)
	routeDriverLogs(stderr)
	root := newRoot(sec)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// Completion scripts, like help, print nothing given to the command:
	// they are written as they are.
	addCompletion(root, helpOut)
	// Help prints no value given to the command, only the flags' help and
	// their compiled-in defaults: it is written as it is, so that the
	// forms it documents (user:pass@host) are not taken for secrets.
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		c.SetOut(helpOut)
		help(c, args)
	})
	root.SetArgs(longFlagsCompat(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	name := "dagflow"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %v\nRun '%s -h' for usage.\n", name, err, name)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}

// newRoot builds the command tree.
func newRoot(sec *secrets) *cobra.Command {
	root := &cobra.Command{
		Use:   "dagflow",
		Short: "dagflow runs and operates dagflow workflow engines",
		Long: "dagflow runs and operates dagflow workflow engines.\n\n" +
			"Flags may come before or after the arguments. Connection settings also come from\n" +
			"DAGFLOW_* environment variables; each flag's help names its variable.",
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			cmd.Usage()
			return usagef("no command given")
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCmd(sec), newWorkerCmd(sec), newMigrateCmd(sec), newWorkflowsCmd(sec), newTriggerCmd(sec),
		newRunsCmd(sec), newEventsCmd(sec), newDLQCmd(sec), newSchedulesCmd(sec), newAPIKeysCmd(sec), newNodesCmd(sec), newQueuesCmd(sec), newCodecCmd(sec), newVersionCmd())
	root.AddCommand(embeddedCommands(sec)...)
	return root
}

// addCompletion adds cobra's completion command (completion bash|zsh|...),
// writing its scripts to out. It is made here rather than by Execute so
// that a shell it does not know is a usage error, as elsewhere.
func addCompletion(root *cobra.Command, out io.Writer) {
	prev := root.OutOrStdout()
	root.SetOut(out) // the script writers keep the writer they see now
	root.InitDefaultCompletionCmd()
	root.SetOut(prev)
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = noArgs
			c.RunE = func(cmd *cobra.Command, _ []string) error {
				return usagef("no shell given (want one of: %s)", subcommandNames(cmd))
			}
		}
	}
}

// noArgs refuses any argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return usagef("unknown command %q (want one of: %s)", args[0], subcommandNames(cmd))
		}
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

func subcommandNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// exactArgs wants the named arguments, and says which are missing.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return usagef("missing %s (usage: %s)", strings.Join(names[len(args):], " and "), cmd.UseLine())
		}
		if len(args) > len(names) {
			return usagef("unexpected argument %q after %s", args[len(names)], strings.Join(names, " "))
		}
		return nil
	}
}

// longFlagsCompat rewrites the Go-flag spelling of a long flag, -name or
// -name=value, as --name, so that scripts written for the flag package's
// command line still work. Only names of long flags are rewritten, and
// nothing after "--".
func longFlagsCompat(root *cobra.Command, args []string) []string {
	long := map[string]bool{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		mark := func(f *pflag.Flag) {
			if len(f.Name) > 1 {
				long[f.Name] = true
			}
		}
		c.Flags().VisitAll(mark)
		c.PersistentFlags().VisitAll(mark)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if long[name] {
				out[i] = "-" + a
			}
		}
	}
	return out
}

// newVersionCmd is `dagflow version`, the same as --version.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the module version and VCS revision",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return nil
		},
	}
}

// versionString describes the binary from its build information: module,
// version, VCS revision and time (when built from a checkout), Go version.
func versionString() string { return buildinfo.String() }

// versionOf is buildinfo.Describe.
func versionOf(bi *debug.BuildInfo, ok bool) string { return buildinfo.Describe(bi, ok) }
