package store

// SingleProcess is implemented by stores that only the process that opened
// them can reach (pebblestore holds its directory's lock): every transaction
// on them is one of this process's. The namespace engine then knows every
// operation under way from its own bookkeeping (a subtree operation's
// quiesce waits for the attempts in flight instead of locking every row
// below). Found by type assertion; a store that may be shared (a SQL
// database that many NameNodes reach), or a wrapper that does not say,
// does not implement it.
type SingleProcess interface {
	SingleProcess()
}
