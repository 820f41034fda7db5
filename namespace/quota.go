package namespace

import (
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/store"
)

// charge adds dNs inodes and dSpace bytes to the usage of every directory with
// a quota among dirs (the chain from the root down to the directory whose
// subtree changes), failing with ErrQuota when a growing usage would pass a
// limit. Directories with a quota are updated, so they must be locked
// exclusive: when one is not, the operation restarts with it locked from the
// start (quota directories are rare, so this costs one restart the first
// time an operation meets one).
func (t *tx) charge(op, path string, dirs []*store.Inode, dNs, dSpace int64) error {
	return t.chargeQuota(op, path, dirs, dNs, dSpace, true)
}

// adjust changes the space usage of the quota directories among dirs by
// dSpace without checking any limit: for bytes already stored (lease
// recovery).
func (t *tx) adjust(op, path string, dirs []*store.Inode, dSpace int64) error {
	return t.chargeQuota(op, path, dirs, 0, dSpace, false)
}

func (t *tx) chargeQuota(op, path string, dirs []*store.Inode, dNs, dSpace int64, check bool) error {
	if dNs == 0 && dSpace == 0 {
		return nil
	}
	restart := false
	for _, d := range dirs {
		if d != nil && d.HasQuota() && t.mode(d) != store.Exclusive {
			_ = t.needExclusive(d.Key())
			restart = true
		}
	}
	if restart {
		return errRetry
	}
	for _, d := range dirs {
		if !check {
			break
		}
		if d == nil || !d.HasQuota() {
			continue
		}
		if dNs > 0 && d.NsQuota >= 0 && d.NsUsed+dNs > d.NsQuota {
			return meta.Errorf(op, path, meta.ErrQuota, "namespace quota of %s exceeded: quota %d, in use %d, adding %d",
				d.Name, d.NsQuota, d.NsUsed, dNs)
		}
		if dSpace > 0 && d.SpaceQuota >= 0 && d.SpaceUsed+dSpace > d.SpaceQuota {
			return meta.Errorf(op, path, meta.ErrQuota, "space quota of %s exceeded: quota %d bytes, in use %d, adding %d",
				d.Name, d.SpaceQuota, d.SpaceUsed, dSpace)
		}
	}
	for _, d := range dirs {
		if d != nil && d.HasQuota() {
			d.NsUsed += dNs
			d.SpaceUsed += dSpace
			t.put(d)
		}
	}
	return nil
}
