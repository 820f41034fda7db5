package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/nimbus-fs/nimbus/meta"
)

// cmdFsck is `nimbus fsck [--data DIR | --store URL] [--json]`: it checks
// the namespace invariants, through the running server at NIMBUS_ADDR or,
// with --data, in the store of a stopped server, or, with --store, in a
// PostgreSQL database directly. Exit 0 only when the namespace is clean, 1
// when a problem was found or the check could not run, 2 on bad usage.
func cmdFsck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("fsck", flag.ContinueOnError)
	fl.SetOutput(stderr)
	data := fl.String("data", "", "check the store in `DIR` (server stopped) instead of asking the running server")
	storeURL := fl.String("store", "", "check the namespace in the PostgreSQL database at `URL` (postgres://...) directly, servers running or not")
	jsonOut := fl.Bool("json", false, "print the report as one JSON document")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: nimbus fsck [--data DIR | --store postgres://...] [--json]")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fl.NArg() != 0 {
		fmt.Fprintf(stderr, "nimbus fsck: unexpected argument %q\n", fl.Arg(0))
		fl.Usage()
		return 2
	}
	var (
		rep *meta.FsckReport
		err error
	)
	switch {
	case *data != "" && *storeURL != "":
		fmt.Fprintln(stderr, "nimbus fsck: --data and --store name two stores; give one")
		return 2
	case *data != "":
		rep, err = fsckLocal(ctx, *data)
	case *storeURL != "":
		rep, err = fsckPostgres(ctx, *storeURL)
	default:
		rep, err = fsckRemote(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "nimbus fsck: %v\n", err)
		return 1
	}
	return printFsck(rep, *jsonOut, stdout)
}

// jsonFsck is the --json shape of an fsck report.
type jsonFsck struct {
	Clean       bool     `json:"clean"`
	Inodes      int64    `json:"inodes"`
	Directories int64    `json:"directories"`
	Files       int64    `json:"files"`
	Symlinks    int64    `json:"symlinks"`
	Bytes       int64    `json:"bytes"`
	DataChunks  int64    `json:"data_chunks"`
	Blocks      int64    `json:"blocks"`
	Problems    []string `json:"problems"`
}

// printFsck prints rep and returns the exit status: 0 when clean, else 1.
func printFsck(rep *meta.FsckReport, jsonOut bool, w io.Writer) int {
	code := 0
	if !rep.Clean() {
		code = 1
	}
	if jsonOut {
		j := jsonFsck{Clean: rep.Clean(), Inodes: rep.Inodes, Directories: rep.Directories,
			Files: rep.Files, Symlinks: rep.Symlinks, Bytes: rep.Bytes, DataChunks: rep.DataChunks, Blocks: rep.Blocks,
			Problems: rep.Problems}
		if j.Problems == nil {
			j.Problems = []string{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(j); err != nil {
			return 1
		}
		return code
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
	status := "HEALTHY"
	if code != 0 {
		status = "CORRUPT"
	}
	fmt.Fprintf(w, "Status: %s\n", status)
	fmt.Fprintf(w, " Total inodes:\t%d\n", rep.Inodes)
	fmt.Fprintf(w, " Directories:\t%d\n", rep.Directories)
	fmt.Fprintf(w, " Files:\t\t%d\n", rep.Files)
	fmt.Fprintf(w, " Symlinks:\t%d\n", rep.Symlinks)
	fmt.Fprintf(w, " Total bytes:\t%d\n", rep.Bytes)
	fmt.Fprintf(w, " Data chunks:\t%d\n", rep.DataChunks)
	fmt.Fprintf(w, " Blocks:\t%d\n", rep.Blocks)
	fmt.Fprintf(w, " Problems:\t%d\n", len(rep.Problems))
	fmt.Fprintf(w, "\nThe filesystem under path '/' is %s\n", status)
	return code
}
