package client_test

import "runtime"

func testingProcs() int { return runtime.GOMAXPROCS(0) }
