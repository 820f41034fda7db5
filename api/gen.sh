#!/bin/sh
# Regenerates nimbus.pb.go from nimbus.proto. Needs protoc (apt-get install
# protobuf-compiler) and protoc-gen-go v1.36.12
# (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
# The generated file is committed: builds and CI never run protoc.
set -eu
cd "$(dirname "$0")"
PATH="$PATH:$(go env GOPATH)/bin"
protoc --go_out=. --go_opt=paths=source_relative nimbus.proto
