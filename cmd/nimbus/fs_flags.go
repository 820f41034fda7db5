package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
)

var errUsage = errors.New("bad usage")

// parseInvocation parses the flags and arguments of one sub-command, hdfs
// style: single-letter flags before the arguments, which may be combined
// ("-rf"); "--" ends the flags; "-" alone is an argument (stdin/stdout).
// "--json" is accepted among the flags as well as before the sub-command.
//
// For chmod (modeArg) an argument that is not made of known flags ends the
// flags, so that "chmod -w PATH" reads "-w" as the mode.
//
// The commands that move contents take more (see transferLetters and
// createFlags): put, get and cat take -v, and put takes --block-size,
// --replication and -D, whose values it binds into the returned invocation.
func parseInvocation(cmd *fsCommand, args []string) (inv *invocation, jsonOut bool, err error) {
	inv = &invocation{cmd: cmd, flags: map[byte]bool{}}
	accepted := cmd.flags + transferLetters[cmd.name]
	var create createFlags
	i := 0
flags:
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			i++
			break flags
		case a == "--json" || a == "-json":
			jsonOut = true
			continue
		case a == "-" || !strings.HasPrefix(a, "-"):
			break flags
		case cmd.name == "put" && isCreateFlag(a):
			n, err := create.parse(args[i:])
			if err != nil {
				return nil, false, fmt.Errorf("%w: %v", errUsage, err)
			}
			i += n - 1
			continue
		}
		letters := a[1:]
		known := true
		for j := 0; j < len(letters); j++ {
			if strings.IndexByte(accepted, letters[j]) < 0 {
				known = false
				break
			}
		}
		if !known {
			if cmd.modeArg {
				break flags
			}
			return nil, false, fmt.Errorf("%w: unknown flag %q", errUsage, a)
		}
		for j := 0; j < len(letters); j++ {
			inv.flags[letters[j]] = true
		}
	}
	inv.args = args[i:]
	if n := len(inv.args); n < cmd.minArgs || (cmd.maxArgs >= 0 && n > cmd.maxArgs) {
		return nil, false, fmt.Errorf("%w: wrong number of arguments (%d)", errUsage, n)
	}
	if cmd.name == "put" {
		// The command table's run takes no options; bind them here, in a
		// copy of this command, so that put sees exactly what was parsed.
		bound := *cmd
		bound.run = func(sh *shell, ctx context.Context, inv *invocation) int {
			return sh.putWith(ctx, inv, create.options())
		}
		inv.cmd = &bound
	}
	return inv, jsonOut, nil
}

// transferLetters are the single-letter flags that put, get and cat accept
// beyond their entries in the command table: -v forces the progress bar.
var transferLetters = map[string]string{"put": "v", "get": "v", "cat": "v"}

// Limits of put's flags. Block sizes are multiples of the 512-byte checksum
// chunk, as HDFS's client requires (io.bytes.per.checksum); the server
// enforces its own maximum replication.
const (
	checksumChunk  = 512
	maxReplication = math.MaxUint16
)

// createFlags are put's flags that shape the files it creates; zero values
// mean the server's defaults.
type createFlags struct {
	blockSize   int64
	replication uint16
}

func (c createFlags) options() meta.CreateOptions {
	return meta.CreateOptions{BlockSize: c.blockSize, Replication: c.replication}
}

// isCreateFlag reports whether a is one of put's flags with a value:
// --block-size, --replication (also as --name=VALUE) or -D (also -Dp=v).
func isCreateFlag(a string) bool {
	name, _, _ := strings.Cut(a, "=")
	return name == "--block-size" || name == "--replication" || strings.HasPrefix(a, "-D")
}

// parse reads one flag and its value from the start of args and returns how
// many arguments it used. Later flags override earlier ones.
func (c *createFlags) parse(args []string) (int, error) {
	a := args[0]
	name, value, inline := strings.Cut(a, "=")
	used := 1
	switch {
	case strings.HasPrefix(a, "-D"):
		// hdfs dfs's generic option: "-D property=value" or "-Dproperty=value".
		prop := strings.TrimPrefix(a, "-D")
		if prop == "" {
			if len(args) < 2 {
				return 0, errors.New("-D needs property=value")
			}
			prop, used = args[1], 2
		}
		key, v, ok := strings.Cut(prop, "=")
		if !ok {
			return 0, fmt.Errorf("-D %s: want property=value", prop)
		}
		switch key {
		case "dfs.blocksize", "dfs.block.size":
			name = "--block-size"
		case "dfs.replication":
			name = "--replication"
		default:
			return 0, fmt.Errorf("-D %s: unknown property (put knows dfs.blocksize and dfs.replication)", key)
		}
		value = v
	case !inline:
		if len(args) < 2 {
			return 0, fmt.Errorf("%s needs a value", name)
		}
		value, used = args[1], 2
	}
	var err error
	switch name {
	case "--block-size":
		c.blockSize, err = parseBlockSize(value)
	case "--replication":
		c.replication, err = parseReplication(value)
	}
	if err != nil {
		return 0, fmt.Errorf("%s %q: %v", name, value, err)
	}
	return used, nil
}

// parseSize reads a byte count: plain digits, or digits with one of the
// binary suffixes k, m, g, t (KiB, MiB, GiB, TiB; either case), as Hadoop's
// configuration reads dfs.blocksize ("128m").
func parseSize(s string) (int64, error) {
	digits, shift := s, 0
	if s != "" {
		if i := strings.IndexByte("kmgt", lower(s[len(s)-1])); i >= 0 {
			digits, shift = s[:len(s)-1], 10*(i+1)
		}
	}
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, errors.New("not a size (bytes, or a number with suffix k, m, g or t)")
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64>>shift {
		return 0, errors.New("size too large")
	}
	return n << shift, nil
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

func parseBlockSize(s string) (int64, error) {
	n, err := parseSize(s)
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return 0, errors.New("block size must be positive")
	case n%checksumChunk != 0:
		return 0, fmt.Errorf("block size must be a multiple of %d bytes", checksumChunk)
	}
	return n, nil
}

func parseReplication(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("not a replication factor (1 to %d)", maxReplication)
	}
	return uint16(n), nil
}
