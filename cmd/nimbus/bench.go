package main

import (
	"context"
	"fmt"
	"io"
)

// cmdBench is a placeholder until the command is written.
func cmdBench(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "nimbus bench: not implemented yet")
	return 1
}
