package main

import (
	"errors"
	"fmt"
	"strings"
)

var errUsage = errors.New("bad usage")

// parseInvocation parses the flags and arguments of one sub-command, hdfs
// style: single-letter flags before the arguments, which may be combined
// ("-rf"); "--" ends the flags; "-" alone is an argument (stdin/stdout).
// "--json" is accepted among the flags as well as before the sub-command.
//
// For chmod (modeArg) an argument that is not made of known flags ends the
// flags, so that "chmod -w PATH" reads "-w" as the mode.
func parseInvocation(cmd *fsCommand, args []string) (inv *invocation, jsonOut bool, err error) {
	inv = &invocation{cmd: cmd, flags: map[byte]bool{}}
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
		}
		letters := a[1:]
		known := true
		for j := 0; j < len(letters); j++ {
			if strings.IndexByte(cmd.flags, letters[j]) < 0 {
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
	return inv, jsonOut, nil
}
