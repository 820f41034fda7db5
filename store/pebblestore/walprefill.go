package pebblestore

import (
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// prefillFile keeps the bytes just past the end of a write-ahead log already
// written (zeros) and synced, so that a commit's fdatasync overwrites blocks
// the file already has and does not grow it.
//
// Why: on ext4 here an fdatasync after an append that grew the file costs
// ~200 µs (the new size goes through the journal), one after an overwrite
// inside the file ~140 µs (measured back to back, 200-byte writes). Every
// durable commit pays one, so at one client that is ~15% of an operation.
// fallocate does not help (an unwritten extent becomes written at the sync,
// which is journalled too), which is why Pebble's own preallocation leaves
// the cost where it is; HDFS's edit log fills ahead with real bytes for the
// same reason.
//
// A background goroutine writes zeros in chunks at the far end, syncs them,
// and stays at most ahead bytes in front of the log's writer. The writer's
// bytes and the zeros never overlap: the filler claims [from, to) only beyond
// every byte the writer has been handed, and a Write that would reach into a
// chunk being filled waits for it (with ahead ≥ 4 chunks that means the log is
// written faster than a disk writes zeros).
//
// Recovery reads the zero tail as Pebble reads its recycled and preallocated
// logs: a log that ends in zeros ends there (a zeroed chunk with no valid
// chunk after it is an unclean end, tolerated in the newest log; older logs
// were closed with an EOF trailer before the next log was created, and a
// reader stops at the trailer). TestWALPrefillRecovery checks both.
type prefillFile struct {
	vfs.File
	ahead, chunk int64

	mu      sync.Mutex
	cond    sync.Cond
	written int64 // end of what the writer has been handed
	filled  int64 // end of the file: the writer's bytes or the zeros
	filling bool  // a chunk [filled, filled+chunk) is being written
	closed  bool
	done    chan struct{} // closed when the filler has returned
}

// newPrefillFile starts filling f, whose current size is size (a recycled
// log has its old contents, which are overwritten in place anyway).
func newPrefillFile(f vfs.File, size, ahead int64) *prefillFile {
	p := &prefillFile{File: f, ahead: ahead, chunk: max(ahead/4, 4<<10), filled: size, done: make(chan struct{})}
	p.cond.L = &p.mu
	go p.fill()
	return p
}

func (p *prefillFile) Write(b []byte) (int, error) {
	p.mu.Lock()
	end := p.written + int64(len(b))
	for p.filling && end > p.filled {
		p.cond.Wait()
	}
	p.written = end
	p.filled = max(p.filled, end)
	// Wake the filler only when the lead fell under its mark: a wake-up per
	// write would cost a goroutine switch per WAL write for nothing.
	wake := !p.filling && p.filled-p.written < p.ahead
	p.mu.Unlock()
	if wake {
		p.cond.Broadcast()
	}
	return p.File.Write(b)
}

// fill runs until Close: it keeps [written, written+ahead) filled.
func (p *prefillFile) fill() {
	defer close(p.done)
	zeros := make([]byte, p.chunk)
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for !p.closed && p.filled-p.written >= p.ahead {
			p.cond.Wait()
		}
		if p.closed {
			return
		}
		from := p.filled
		p.filling = true
		p.mu.Unlock()
		_, err := p.File.WriteAt(zeros, from)
		if err == nil {
			// Sync the zeros and the new size here, so that the next commit's
			// sync finds nothing of them to write.
			err = p.File.SyncData()
		}
		p.mu.Lock()
		p.filling = false
		if err == nil {
			p.filled = max(p.filled, from+p.chunk)
		}
		p.cond.Broadcast()
		if err != nil {
			// The log is written as without prefill; its own writes and
			// syncs report any error of the disk.
			return
		}
	}
}

// Close stops the filler, then closes the file. The zeros past the log's
// end stay; a reader stops at Pebble's EOF trailer before them.
func (p *prefillFile) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Broadcast()
	<-p.done
	return p.File.Close()
}
