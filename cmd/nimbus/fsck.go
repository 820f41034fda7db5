package main

import (
	"context"
	"fmt"
	"io"
)

// cmdFsck is a placeholder until the command is written.
func cmdFsck(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nimbus fsck: not implemented yet")
	return 1
}
