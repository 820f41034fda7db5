#!/bin/sh
# Regenerates nimbus.pb.go and nimbus_vtproto.pb.go from nimbus.proto. Needs
# protoc (apt-get install protobuf-compiler), protoc-gen-go v1.36.12
# (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12) and
# protoc-gen-go-vtproto v0.6.0
# (go install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@v0.6.0),
# which generates reflection-free Marshal/Unmarshal/Size for the hot path,
# an in-place UnmarshalVTUnsafe, and pools for the listing page and its entries
# (docs/RPC.md, "Listings are decoded in place").
# The generated files are committed: builds and CI never run protoc.
set -eu
cd "$(dirname "$0")"
PATH="$PATH:$(go env GOPATH)/bin"
protoc --go_out=. --go_opt=paths=source_relative \
  --go-vtproto_out=. --go-vtproto_opt=paths=source_relative,features=marshal+unmarshal+unmarshal_unsafe+size+pool,pool=github.com/nimbus-fs/nimbus/api.Listing,pool=github.com/nimbus-fs/nimbus/api.FileStatus \
  nimbus.proto
