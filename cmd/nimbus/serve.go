package main

import (
	"context"
	"fmt"
	"io"
)

// cmdServe is a placeholder until the command is written.
func cmdServe(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nimbus serve: not implemented yet")
	return 1
}
