package fstest

import (
	"context"
	"errors"
	"testing"

	"github.com/nimbus-fs/nimbus/meta"
)

// Opener returns a fresh, empty file system (only its root), closed by
// t.Cleanup when the case ends.
type Opener func(t *testing.T) meta.FileSystem

// Config describes the implementation under test.
type Config struct {
	// Superuser is a user with every right (SetOwner, SetQuota).
	Superuser string
	// MaxFile is the implementation's size limit: a write that takes a
	// file past it is ErrTooLarge. 0 skips the check.
	MaxFile int64
	// ListLimit is the most entries one List page returns whatever the
	// caller asks. 0 skips the check.
	ListLimit int
	// Defaults, when not nil, is what Defaults must return (fields left
	// zero are not compared).
	Defaults *meta.ServerDefaults
	// Caps is what the implementation offers.
	Caps Caps
	// Reports, when not nil, gives the kinds the implementation reports
	// in place of want because its protocol cannot tell them apart
	// (WebHDFS carries kinds as Java exception classes, several kinds
	// share one, and some refusals are a bare false); meta.KindUnknown
	// stands for an error of no kind. The suite accepts want or any of
	// them.
	Reports func(want error) []meta.Kind
}

// Caps lists what the implementations differ on, each for a reason the
// binding states.
type Caps struct {
	// Permissions: every operation checks the caller's rights (mode bits
	// and ACLs) as HDFS does. MemFS checks only the superuser-only calls.
	Permissions bool
	// Quotas: namespace quotas are enforced. MemFS records them only.
	Quotas bool
	// OpenFiles: a file stays open between Create (or Append) and
	// Complete, leased to one client, with its new data invisible and
	// writes at its written length only. WebHDFS closes a file at the end
	// of every CREATE or APPEND request and makes missing parents on
	// CREATE.
	OpenFiles bool
	// Symlinks: CreateSymlink makes a link that Stat reports and that a
	// path through it does not cross (ErrUnresolvedLink).
	Symlinks bool
	// ACLs: POSIX ACLs and their inheritance by new children, and the
	// unmasked mode of Create and MkdirsUnmasked (HDFS-6962).
	ACLs bool
	// XAttrs: extended attributes with HDFS's namespace rules.
	XAttrs bool
	// ConcatTruncate: Truncate and Concat.
	ConcatTruncate bool
	// OwnUser: an empty meta.User stands for the implementation's
	// configured user (the WebHDFS client's Config.User) instead of being
	// refused as nobody.
	OwnUser bool
	// OwnClientName: an empty CreateOptions.Client stands for the
	// implementation's own name (the Go client has one, ClientName)
	// instead of being refused as ErrInvalidArgument.
	OwnClientName bool
	// Summary: ContentSummary's counts and the space consumed
	// (length times replication).
	Summary bool
}

// AllCaps is every capability: what the engine offers.
func AllCaps() Caps {
	return Caps{Permissions: true, Quotas: true, OpenFiles: true, Symlinks: true, ACLs: true,
		XAttrs: true, ConcatTruncate: true, Summary: true}
}

// Case is one behaviour check.
type Case struct {
	Name string
	// Needs, when not nil, says whether the case applies to caps.
	Needs func(Caps) bool
	Run   func(c *C, fs meta.FileSystem)
}

// Cases returns every case of the suite.
func Cases() []Case {
	var cs []Case
	cs = append(cs, treeCases...)
	cs = append(cs, attrCases...)
	cs = append(cs, aclCases...)
	cs = append(cs, optionalCases...)
	return cs
}

// Run runs every case that applies to cfg.Caps against a fresh file system
// from open, each as a subtest.
func Run(t *testing.T, cfg Config, open Opener) {
	t.Helper()
	if cfg.Superuser == "" {
		t.Fatal("fstest: Config.Superuser is empty")
	}
	for _, tc := range Cases() {
		t.Run(tc.Name, func(t *testing.T) {
			if tc.Needs != nil && !tc.Needs(cfg.Caps) {
				t.Skipf("needs a capability this implementation lacks (%+v)", cfg.Caps)
			}
			tc.Run(&C{T: t, Cfg: cfg, Root: meta.User{Name: cfg.Superuser}, Ctx: t.Context()}, open(t))
		})
	}
}

// C is what a case works with: the test, the configuration, the superuser
// and ordinary users (alice, bob; neither in any group).
type C struct {
	T   *testing.T
	Cfg Config
	// Root is the superuser.
	Root meta.User
	Ctx  context.Context
}

var (
	alice = meta.User{Name: "alice"}
	bob   = meta.User{Name: "bob"}
)

// Is fails the test with the step's name when err is not of kind want
// (nil: success), or is not a *meta.OpError naming an operation and a path.
func (c *C) Is(step string, err, want error) {
	c.T.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) && !c.reported(err, want) {
		c.T.Fatalf("%s: got %v, want %v", step, err, want)
	}
	if err == nil {
		return
	}
	var oe *meta.OpError
	if !errors.As(err, &oe) {
		c.T.Fatalf("%s: %v (%T) is not a *meta.OpError", step, err, err)
	}
	if oe.Op == "" || oe.Path == "" {
		c.T.Fatalf("%s: %v does not name its operation and path (op %q, path %q)", step, err, oe.Op, oe.Path)
	}
}

// reported says whether err is of a kind Cfg.Reports allows for want.
func (c *C) reported(err, want error) bool {
	if c.Cfg.Reports == nil || err == nil {
		return false
	}
	for _, k := range c.Cfg.Reports(want) {
		if meta.KindOf(err) == k {
			return true
		}
	}
	return false
}

// At is Is that also wants the error to name path.
func (c *C) At(step string, err, want error, path string) {
	c.T.Helper()
	c.Is(step, err, want)
	var oe *meta.OpError
	if errors.As(err, &oe) && oe.Path != path {
		c.T.Fatalf("%s: %v names path %q, want %q", step, err, oe.Path, path)
	}
}

// Stat returns path's status as the superuser sees it, failing the test on
// an error.
func (c *C) Stat(fs meta.FileSystem, p string) *meta.FileStatus {
	c.T.Helper()
	st, err := fs.Stat(c.Ctx, c.Root, p)
	c.Is("stat "+p, err, nil)
	return st
}

// File makes a complete file holding data as u, with its parents.
func (c *C) File(fs meta.FileSystem, u meta.User, p, data string) {
	c.T.Helper()
	_, err := meta.CreateFile(c.Ctx, fs, u, p, meta.CreateOptions{Client: "setup", CreateParent: true}, []byte(data))
	c.Is("create "+p, err, nil)
}

// Home makes /home, open to everyone (0777), for cases whose ordinary users
// create entries.
func (c *C) Home(fs meta.FileSystem) {
	c.T.Helper()
	c.Is("mkdirs /home", fs.Mkdirs(c.Ctx, c.Root, "/home", 0o777), nil)
	c.Is("chmod /home", fs.SetPermission(c.Ctx, c.Root, "/home", 0o777), nil)
}

// Read reads all of p as u.
func (c *C) Read(fs meta.FileSystem, u meta.User, p string) string {
	c.T.Helper()
	b, err := fs.Read(c.Ctx, u, p, 0, 1<<30)
	c.Is("read "+p, err, nil)
	return string(b)
}
