module github.com/nimbus-fs/nimbus

go 1.26
