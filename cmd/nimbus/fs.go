package main

import (
	"context"
	"fmt"
	"io"
)

// cmdFS is a placeholder until the command is written.
func cmdFS(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nimbus fs: not implemented yet")
	return 1
}
