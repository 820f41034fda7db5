package main

import (
	"context"
	"errors"

	"github.com/nimbus-fs/nimbus/meta"
)

// errNoClient: the client package is not wired in yet.
var errNoClient = errors.New("the client library is not available in this build")

// dialFS connects to the server at NIMBUS_ADDR as NIMBUS_USER (else the OS
// user). The returned func closes the connection.
func dialFS(ctx context.Context) (remoteFS, meta.User, func(), error) {
	return nil, meta.User{}, nil, errNoClient
}

// fsckRemote asks the running server at NIMBUS_ADDR to check the namespace.
func fsckRemote(ctx context.Context) (*meta.FsckReport, error) {
	return nil, errNoClient
}

// fsckLocal checks the store of a stopped server in directory dir.
func fsckLocal(ctx context.Context, dir string) (*meta.FsckReport, error) {
	return nil, errNoClient
}
