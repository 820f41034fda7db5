package main

// nimbus fs: the file system shell, in the spirit of `hdfs dfs`.
//
// The command logic lives in a shell value that works against remoteFS (the
// namespace contract plus streaming), so that tests run every sub-command
// in process against the real engine. Files of this command:
//
//	fs.go         entry point, sub-command table, the shell
//	fs_flags.go   hdfs-style flag parsing
//	fs_paths.go   relative path resolution and display paths
//	fs_errors.go  error reporting, kind names, the JSON result shape
//	fs_format.go  ls lines, human sizes, stat formats, the JSON status shape
//	fs_ls.go      ls, stat, du, count, test
//	fs_modify.go  mkdir, touch, mv, rm
//	fs_chmod.go   chmod (mode parser), chown
//	fs_copy.go    put, get, cat
//	fs_stream.go  streaming adapter over a plain meta.FileSystem
//	fs_walk.go    paged listing and subtree walks
//	fs_dial.go    connecting to the server / opening a local store
//	fs_acl.go     setfacl, getfacl, setfattr, getfattr

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// remoteFS is what the shell needs: the namespace contract plus streaming.
// *client.Client implements it; streamFS adapts any meta.FileSystem (the
// in-process engine in tests).
type remoteFS interface {
	meta.FileSystem
	// OpenReader streams the completed content of a file.
	OpenReader(ctx context.Context, u meta.User, path string) (io.ReadCloser, error)
	// CreateWriter creates a file and returns a writer; Close completes the
	// file (its content becomes visible) and reports any error of the upload.
	CreateWriter(ctx context.Context, u meta.User, path string, opts meta.CreateOptions) (io.WriteCloser, error)
}

// shell runs fs sub-commands against one file system as one user. It is not
// safe for concurrent use: one command at a time.
type shell struct {
	fs     remoteFS
	user   meta.User
	home   string // /user/<name>: where relative paths resolve
	json   bool
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time // for touch
	loc    *time.Location   // for ls dates (stat %y is always UTC, as in HDFS)

	failed bool // an operation failed: exit status 1
	// unknown: an operation's outcome is unknown (meta.KindOutcomeUnknown):
	// exit status 3, which tells a script that retrying blindly may apply
	// it twice, where 1 says that it did not happen.
	unknown bool
}

func newShell(fs remoteFS, u meta.User, stdin io.Reader, stdout, stderr io.Writer) *shell {
	return &shell{
		fs:     fs,
		user:   u,
		home:   homeDir(u),
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
		now:    time.Now,
		loc:    time.Local,
	}
}

// fsCommand is one sub-command: its flags, argument count and body.
type fsCommand struct {
	name    string
	args    string // usage text after the name
	flags   string // accepted single-letter flags
	minArgs int
	maxArgs int // -1: unbounded
	// modeArg: the first non-flag argument may start with '-' (chmod -w).
	modeArg bool
	help    string
	run     func(sh *shell, ctx context.Context, inv *invocation) int
}

// invocation is a parsed command line of one sub-command.
type invocation struct {
	cmd   *fsCommand
	flags map[byte]bool
	args  []string
}

func (inv *invocation) has(f byte) bool { return inv.flags[f] }

func fsCommands() []*fsCommand {
	return []*fsCommand{
		{name: "ls", args: "[-R] [-d] [-h] [PATH...]", flags: "Rdh", maxArgs: -1, run: (*shell).ls,
			help: "list directories (-R recursively, -d the directory itself, -h human sizes)"},
		{name: "mkdir", args: "[-p] PATH...", flags: "p", minArgs: 1, maxArgs: -1, run: (*shell).mkdir,
			help: "create directories (-p: with parents, no error if present)"},
		{name: "touch", args: "PATH...", minArgs: 1, maxArgs: -1, run: (*shell).touch,
			help: "create empty files, or set the times of existing ones to now"},
		{name: "put", args: "[-f] [-v] [--block-size SIZE] [--replication N] LOCAL... DST", flags: "f", minArgs: 2, maxArgs: -1, run: (*shell).put,
			help: "copy local files or directories in (- reads stdin; -f overwrites)"},
		{name: "get", args: "[-f] [-v] SRC... LOCALDST", flags: "f", minArgs: 2, maxArgs: -1, run: (*shell).get,
			help: "copy files or directories out (- writes stdout; -f overwrites)"},
		{name: "cat", args: "[-v] PATH...", minArgs: 1, maxArgs: -1, run: (*shell).cat,
			help: "write file contents to stdout"},
		{name: "stat", args: "[FORMAT] PATH...", minArgs: 1, maxArgs: -1, run: (*shell).stat,
			help: "print file status in FORMAT (%n %b %o %r %u %g %y %Y %x %X %F %a %A; default %y)"},
		{name: "mv", args: "SRC... DST", minArgs: 2, maxArgs: -1, run: (*shell).mv,
			help: "move or rename (into DST when it is a directory)"},
		{name: "rm", args: "[-r] [-f] PATH...", flags: "rRf", minArgs: 1, maxArgs: -1, run: (*shell).rm,
			help: "delete (-r directories recursively, -f no error if missing)"},
		{name: "chmod", args: "[-R] MODE PATH...", flags: "R", minArgs: 2, maxArgs: -1, modeArg: true, run: (*shell).chmod,
			help: "change permissions: octal (755) or symbolic (u+x,go-w,a=r)"},
		{name: "chown", args: "[-R] OWNER[:GROUP] PATH...", flags: "R", minArgs: 2, maxArgs: -1, run: (*shell).chown,
			help: "change owner and/or group (OWNER, OWNER:GROUP or :GROUP)"},
		{name: "du", args: "[-s] [-h] [PATH...]", flags: "sh", maxArgs: -1, run: (*shell).du,
			help: "space used by each entry (-s: a total per argument)"},
		{name: "count", args: "[-q] [-h] [PATH...]", flags: "qh", maxArgs: -1, run: (*shell).count,
			help: "count directories, files and bytes (-q: with quotas)"},
		{name: "test", args: "-e|-d|-f|-s|-z PATH", flags: "edfsz", minArgs: 1, maxArgs: 1, run: (*shell).test,
			help: "exit 0 if PATH exists / is a directory / a file / non-empty / zero length"},
		{name: "setfacl", args: "[-R] {-m|-x} ACLSPEC PATH | [-R] {-b|-k} PATH | [-R] --set ACLSPEC PATH", minArgs: 2, maxArgs: -1, modeArg: true, run: (*shell).setfacl,
			help: "change ACLs: -m modify entries, -x remove entries, -b remove all, -k remove the default ACL, --set replace"},
		{name: "getfacl", args: "[-R] PATH", minArgs: 1, maxArgs: 2, modeArg: true, run: (*shell).getfacl,
			help: "print ACLs as hdfs dfs -getfacl does"},
		{name: "setfattr", args: "{-n NAME [-v VALUE] | -x NAME} PATH", minArgs: 3, maxArgs: 5, modeArg: true, run: (*shell).setfattr,
			help: "set (-n, -v as text, 0x hex or 0s base64) or remove (-x) an extended attribute"},
		{name: "getfattr", args: "[-R] {-n NAME | -d} [-e ENCODING] PATH", minArgs: 2, maxArgs: -1, modeArg: true, run: (*shell).getfattr,
			help: "print one (-n) or all (-d) extended attributes, -e text|hex|base64"},
	}
}

func findFSCommand(name string) *fsCommand {
	for _, c := range fsCommands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// fsUsage writes the list of sub-commands.
func fsUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: nimbus fs [--json] <command> [flags] [args]\n\ncommands:")
	cmds := fsCommands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-6s %s\n         %s\n", c.name, c.args, c.help)
	}
	fmt.Fprintln(w, "\nRelative paths resolve against /user/$NIMBUS_USER. See docs/CLI.md.")
}

// cmdFS is `nimbus fs`: it parses the command line (usage errors exit 2
// before any connection is made), connects to NIMBUS_ADDR as NIMBUS_USER and
// runs the sub-command.
func cmdFS(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	jsonOut, inv, code := parseFSArgs(args, stderr)
	if inv == nil {
		return code
	}
	fsys, user, closeFS, err := dialFS(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "nimbus fs: %s: %v\n", inv.cmd.name, err)
		return 1
	}
	defer closeFS()
	iw := &interruptWriter{ctx: ctx, w: stderr}
	sh := newShell(fsys, user, os.Stdin, stdout, iw)
	sh.json = jsonOut
	code = sh.run(ctx, inv)
	if ctx.Err() != nil {
		if !iw.said {
			fmt.Fprintf(stderr, "nimbus fs: %s: interrupted\n", inv.cmd.name)
		}
		return exitInterrupted
	}
	return code
}

// exitInterrupted is the status of a command stopped by SIGINT or SIGTERM,
// 128 + SIGINT's number, as shells report it.
const exitInterrupted = 130

// interruptWriter is the shell's stderr: once ctx is done (the user pressed
// Ctrl-C), the operations it cut short say "interrupted" instead of the
// "context canceled" of the error they return.
type interruptWriter struct {
	ctx  context.Context
	w    io.Writer
	said bool // a line said "interrupted"
}

func (iw *interruptWriter) Write(p []byte) (int, error) {
	if iw.ctx.Err() == nil || !bytes.Contains(p, []byte(context.Canceled.Error())) {
		return iw.w.Write(p)
	}
	iw.said = true
	if _, err := iw.w.Write(bytes.ReplaceAll(p, []byte(context.Canceled.Error()), []byte("interrupted"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// parseFSArgs parses global flags, the sub-command name and its flags. It
// returns a nil invocation and the exit status when the command line is bad
// or only help was asked for.
func parseFSArgs(args []string, stderr io.Writer) (jsonOut bool, inv *invocation, code int) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && findFSCommand(args[0][1:]) == nil {
		switch args[0] {
		case "--json", "-json":
			jsonOut = true
		case "-h", "--help", "-help":
			fsUsage(stderr)
			return false, nil, 0
		default:
			fmt.Fprintf(stderr, "nimbus fs: unknown flag %q\n", args[0])
			fsUsage(stderr)
			return false, nil, 2
		}
		args = args[1:]
	}
	if len(args) == 0 {
		fsUsage(stderr)
		return false, nil, 2
	}
	name := strings.TrimPrefix(args[0], "-") // hdfs dfs spells them -ls, -mkdir...
	cmd := findFSCommand(name)
	if cmd == nil {
		fmt.Fprintf(stderr, "nimbus fs: unknown command %q\n", args[0])
		fsUsage(stderr)
		return false, nil, 2
	}
	inv, jsonFlag, err := parseInvocation(cmd, args[1:])
	if err != nil {
		fmt.Fprintf(stderr, "nimbus fs: %s: %v\nusage: nimbus fs %s %s\n", cmd.name, err, cmd.name, cmd.args)
		return false, nil, 2
	}
	return jsonOut || jsonFlag, inv, 0
}

// run executes a parsed invocation and returns the exit status.
func (sh *shell) run(ctx context.Context, inv *invocation) int {
	sh.failed, sh.unknown = false, false
	code := inv.cmd.run(sh, ctx, inv)
	if code == 0 && sh.failed {
		code = 1
	}
	if code == 1 && sh.unknown {
		code = 3
	}
	return code
}

// usageError reports bad usage of a sub-command found after flag parsing
// (a bad mode, a wrong number of sources) and returns exit status 2.
func (sh *shell) usageError(inv *invocation, format string, args ...any) int {
	fmt.Fprintf(sh.stderr, "nimbus fs: %s: %s\nusage: nimbus fs %s %s\n",
		inv.cmd.name, fmt.Sprintf(format, args...), inv.cmd.name, inv.cmd.args)
	return 2
}
