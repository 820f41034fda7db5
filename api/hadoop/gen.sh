#!/bin/sh
# Regenerates the Go code of Hadoop's vendored .proto files (README.md says
# where they come from). Needs protoc (apt-get install protobuf-compiler) and
# protoc-gen-go v1.36.12
# (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12).
# The .proto files are kept as Hadoop ships them: the Go package is given by
# M mappings here rather than go_package options in the files.
# The generated files are committed: builds and CI never run protoc.
set -eu
cd "$(dirname "$0")"
PATH="$PATH:$(go env GOPATH)/bin"
PROTOS="Security.proto acl.proto hdfs.proto datatransfer.proto RpcHeader.proto IpcConnectionContext.proto ProtobufRpcEngine2.proto HAServiceProtocol.proto xattr.proto encryption.proto erasurecoding.proto inotify.proto ClientNamenodeProtocol.proto"
PKG=github.com/nimbus-fs/nimbus/api/hadoop
M=""
for p in $PROTOS; do
  M="$M --go_opt=M$p=$PKG;hadoop"
done
protoc -I. --go_out=. --go_opt=paths=source_relative $M $PROTOS
