package webhdfs

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/webhdfs/wire"
)

func (h *Handler) getFileStatus(rq *request) error {
	// Stat does not follow a final symlink; HDFS's NameNode does not resolve
	// links for WebHDFS either (its clients do, and symlinks are disabled in
	// Hadoop's client by default), so GETFILESTATUS and GETFILELINKSTATUS agree.
	st, err := h.fs.Stat(rq.ctx(), rq.user, rq.path)
	if err != nil {
		return err
	}
	f := wire.FileStatusOf(st, "")
	return writeBuilt(rq.w, func(b []byte) []byte {
		return append(f.AppendJSON(append(b, `{"FileStatus":`...)), "}\n"...)
	})
}

func (h *Handler) getFileLinkStatus(rq *request) error { return h.getFileStatus(rq) }

func (h *Handler) getLinkTarget(rq *request) error {
	st, err := h.fs.Stat(rq.ctx(), rq.user, rq.path)
	if err != nil {
		return err
	}
	if st.Type != meta.TypeSymlink {
		return meta.Errorf(rq.op.lower, rq.path, meta.ErrInvalidArgument, "not a symbolic link")
	}
	return writeJSON(rq.w, http.StatusOK, map[string]string{"Path": st.Symlink})
}

// suffix is the pathSuffix of a listing entry: empty when a file was listed
// (the entry is the file itself), else the child's name.
func suffix(listed string, e *meta.FileStatus) string {
	if e.Path == listed {
		return ""
	}
	return e.Name()
}

// appendEntry appends the FileStatus JSON of e, an entry of the listing of
// the path listed.
func appendEntry(b []byte, listed string, e *meta.FileStatus) []byte {
	f := wire.FileStatusOf(e, suffix(listed, e))
	return f.AppendJSON(b)
}

// listStatus streams the whole listing page by page, so that a huge directory
// costs one page of memory. An error after the first page cuts the connection.
func (h *Handler) listStatus(rq *request) error {
	// Pages are only encoded: a cached one needs no copy (meta.ListToRead).
	page, err := meta.ListToRead(rq.ctx(), h.fs, rq.user, rq.path, "", h.cfg.ListBatch)
	if err != nil {
		return err
	}
	w := rq.w
	bp := bodyPool.Get().(*[]byte)
	defer putBody(bp)
	b := append((*bp)[:0], `{"FileStatuses":{"FileStatus":[`...)
	first := true
	streaming := false
	for {
		for i := range page.Entries {
			e := &page.Entries[i]
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendEntry(b, rq.path, e)
		}
		if page.Remaining <= 0 || len(page.Entries) == 0 {
			break
		}
		// More than a page: stream (chunked), one page of memory at a time.
		if !streaming {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			streaming = true
		}
		if _, err := w.Write(b); err != nil {
			return nil // the client went away
		}
		b = b[:0]
		last := page.Entries[len(page.Entries)-1].Name()
		if page, err = meta.ListToRead(rq.ctx(), h.fs, rq.user, rq.path, last, h.cfg.ListBatch); err != nil {
			return err
		}
	}
	b = append(b, "]}}\n"...)
	*bp = b
	if !streaming {
		return writeBody(w, http.StatusOK, b) // one page: with a Content-Length, in one write
	}
	_, _ = w.Write(b)
	return nil
}

func (h *Handler) listStatusBatch(rq *request) error {
	page, err := meta.ListToRead(rq.ctx(), h.fs, rq.user, rq.path, rq.q["startafter"], h.cfg.ListBatch)
	if err != nil {
		return err
	}
	return writeBuilt(rq.w, func(b []byte) []byte {
		b = wire.AppendDirectoryListingOf(b, len(page.Entries), page.Remaining, func(b []byte, i int) []byte {
			return appendEntry(b, rq.path, &page.Entries[i])
		})
		return append(b, '\n')
	})
}

func (h *Handler) getContentSummary(rq *request) error {
	cs, err := h.fs.ContentSummary(rq.ctx(), rq.user, rq.path)
	if err != nil {
		return err
	}
	return writeJSON(rq.w, http.StatusOK, wire.ContentSummaryReply{ContentSummary: wire.ContentSummary{
		DirectoryCount: cs.DirectoryCount,
		FileCount:      cs.FileCount,
		Length:         cs.Length,
		Quota:          cs.NsQuota,
		SpaceConsumed:  cs.SpaceConsumed,
		SpaceQuota:     cs.SpaceQuota,
	}})
}

func (h *Handler) getQuotaUsage(rq *request) error {
	cs, err := h.fs.ContentSummary(rq.ctx(), rq.user, rq.path)
	if err != nil {
		return err
	}
	return writeJSON(rq.w, http.StatusOK, map[string]quotaUsageJSON{"QuotaUsage": {
		FileAndDirectoryCount: cs.FileCount + cs.DirectoryCount,
		Quota:                 cs.NsQuota,
		SpaceConsumed:         cs.SpaceConsumed,
		SpaceQuota:            cs.SpaceQuota,
	}})
}

func (h *Handler) getHomeDirectory(rq *request) error {
	return writeJSON(rq.w, http.StatusOK, map[string]string{"Path": "/user/" + rq.user.Name})
}

func (h *Handler) getTrashRoot(rq *request) error {
	return writeJSON(rq.w, http.StatusOK, map[string]string{"Path": "/user/" + rq.user.Name + "/.Trash"})
}

func (h *Handler) getServerDefaults(rq *request) error {
	d, err := h.fs.Defaults(rq.ctx())
	if err != nil {
		return err
	}
	return writeJSON(rq.w, http.StatusOK, map[string]serverDefaultsJSON{"FsServerDefaults": {
		BlockSize:              d.BlockSize,
		BytesPerChecksum:       bytesPerCRC,
		WritePacketSize:        64 << 10,
		Replication:            d.Replication,
		FileBufferSize:         4096,
		ChecksumType:           2,
		DefaultStoragePolicyID: 7, // HOT
	}})
}

func (h *Handler) getStatus(rq *request) error {
	cs, err := h.fs.ContentSummary(rq.ctx(), rq.user, meta.RootPath)
	if err != nil {
		return err
	}
	var capacity, remaining int64
	if h.cfg.StatfsDir != "" {
		if capacity, remaining, err = statfs(h.cfg.StatfsDir); err != nil {
			return meta.Errorf(rq.op.lower, rq.path, meta.ErrInternal, "statfs %s: %v", h.cfg.StatfsDir, err)
		}
	}
	return writeJSON(rq.w, http.StatusOK, map[string]map[string]int64{"FsStatus": {
		"capacity": capacity, "used": cs.SpaceConsumed, "remaining": remaining,
	}})
}

// fileOnly stats path and refuses anything but a file, as HDFS's
// getBlockLocations does ("Path is not a file").
func (h *Handler) fileOnly(rq *request) (*meta.FileStatus, error) {
	st, err := h.fs.Stat(rq.ctx(), rq.user, rq.path)
	if err != nil {
		return nil, err
	}
	switch st.Type {
	case meta.TypeDir:
		return nil, meta.Errorf(rq.op.lower, rq.path, meta.ErrIsDir, "")
	case meta.TypeSymlink:
		return nil, meta.Errorf(rq.op.lower, rq.path, meta.ErrUnresolvedLink, "symlink to %s", st.Symlink)
	}
	return st, nil
}

// rangeParams parses offset and length (length absent: to the end).
func rangeParams(rq *request) (offset, length int64, err error) {
	if offset, err = rq.q.int64(rq.op.lower, rq.path, "offset", 0, 0); err != nil {
		return 0, 0, err
	}
	length, err = rq.q.int64(rq.op.lower, rq.path, "length", -1, 0)
	return offset, length, err
}

// block is one synthetic block of a file: Nimbus keeps small files inline in
// the store, and reports them to block-aware clients as blocks of the file's
// block size, all on this server.
type block struct {
	index  int
	offset int64
	length int64
}

// blocksOf cuts a file of the given length into blocks of blockSize and keeps
// those overlapping [offset, offset+length).
func blocksOf(fileLen, blockSize, offset, length int64) []block {
	if blockSize <= 0 {
		blockSize = max(fileLen, 1)
	}
	end := fileLen
	if length >= 0 && offset+length < end && offset+length >= 0 {
		end = offset + length
	}
	var out []block
	for i, start := 0, int64(0); start < fileLen; i, start = i+1, start+blockSize {
		n := min(blockSize, fileLen-start)
		if start+n > offset && start < end || (length == 0 && offset >= start && offset < start+n) {
			out = append(out, block{index: i, offset: start, length: n})
		}
	}
	return out
}

// hostPort is the host and port clients reach this server at.
func (h *Handler) hostPort(rq *request) (string, int) {
	hostport := requestHost(rq.r)
	if h.advertise != "" {
		hostport = h.advertise[strings.Index(h.advertise, "://")+3:]
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport, 80
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

func (h *Handler) getFileBlockLocations(rq *request) error {
	st, err := h.fileOnly(rq)
	if err != nil {
		return err
	}
	offset, length, err := rangeParams(rq)
	if err != nil {
		return err
	}
	host, port := h.hostPort(rq)
	name := joinHostPort(host, port)
	locs := []blockLocationJSON{}
	for _, b := range blocksOf(st.Length, st.BlockSize, offset, length) {
		locs = append(locs, blockLocationJSON{
			CachedHosts:   []string{},
			Hosts:         []string{host},
			Length:        b.length,
			Names:         []string{name},
			Offset:        b.offset,
			StorageIDs:    []string{"nimbus-inline"},
			StorageTypes:  []string{"DISK"},
			TopologyPaths: []string{"/default-rack/" + name},
		})
	}
	return writeJSON(rq.w, http.StatusOK, map[string]map[string][]blockLocationJSON{
		"BlockLocations": {"BlockLocation": locs}})
}

func (h *Handler) getBlockLocations(rq *request) error {
	st, err := h.fileOnly(rq)
	if err != nil {
		return err
	}
	offset, length, err := rangeParams(rq)
	if err != nil {
		return err
	}
	host, port := h.hostPort(rq)
	dn := datanodeInfoJSON{
		IPAddr: host, Name: joinHostPort(host, port), HostName: host,
		StorageID: "nimbus-inline", XferPort: port, InfoPort: port, IPCPort: port,
		NetworkLocation: "/default-rack", AdminState: "NORMAL",
	}
	located := func(b block) locatedBlockJSON {
		return locatedBlockJSON{
			Block: extendedBlockJSON{BlockPoolID: "nimbus", BlockID: st.FileID<<16 | uint64(b.index&0xffff),
				NumBytes: b.length, GenerationStamp: 1001},
			BlockToken:      map[string]string{"urlString": "AAAAAA"}, // an empty Token, URL-safe base64
			CachedLocations: []datanodeInfoJSON{},
			Locations:       []datanodeInfoJSON{dn},
			StartOffset:     b.offset,
			StorageTypes:    []string{"DISK"},
		}
	}
	lb := locatedBlocksJSON{FileLength: st.Length, IsLastBlockComplete: !st.UnderConstruction,
		IsUnderConstruction: st.UnderConstruction, LocatedBlocks: []locatedBlockJSON{}}
	for _, b := range blocksOf(st.Length, st.BlockSize, offset, length) {
		lb.LocatedBlocks = append(lb.LocatedBlocks, located(b))
	}
	if all := blocksOf(st.Length, st.BlockSize, 0, -1); len(all) > 0 {
		last := located(all[len(all)-1])
		lb.LastLocatedBlock = &last
	}
	return writeJSON(rq.w, http.StatusOK, map[string]locatedBlocksJSON{"LocatedBlocks": lb})
}

// open serves OPEN: the first step checks the file and redirects; the data
// step streams [offset, offset+length) in ReadChunk ranges.
func (h *Handler) open(rq *request) error {
	st, err := h.fileOnly(rq)
	if err != nil {
		return err
	}
	offset, length, err := rangeParams(rq)
	if err != nil {
		return err
	}
	if _, err := rq.q.int64(rq.op.lower, rq.path, "buffersize", 0, 1); err != nil {
		return err
	}
	if data, err := isDataStep(rq); err != nil || !data {
		if err != nil {
			return err
		}
		return h.redirect(rq)
	}
	if offset > st.Length {
		// What HDFS's DataNode answers when DFSInputStream.seek fails.
		return &wireError{
			ex:  wire.Exception{Status: http.StatusForbidden, Name: "EOFException", ClassName: "java.io.EOFException"},
			msg: "Cannot seek after EOF: offset " + strconv.FormatInt(offset, 10) + " > length " + strconv.FormatInt(st.Length, 10) + " of " + rq.path,
		}
	}
	end := st.Length
	if length >= 0 && length < end-offset {
		end = offset + length
	}
	// The first range is read before the header goes out, so that a
	// permission error still gets a proper status. It is read even when empty
	// (a 0-byte file, length=0, offset at the end): the read is the permission
	// check, and HDFS refuses those too.
	chunk, err := h.fs.Read(rq.ctx(), rq.user, rq.path, offset, min(int64(h.cfg.ReadChunk), end-offset))
	if err != nil {
		return err
	}
	w := rq.w
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(end-offset, 10))
	w.WriteHeader(http.StatusOK)
	pos := offset
	for pos < end {
		if len(chunk) == 0 {
			// The file shrank under us (truncate): we promised more bytes
			// than exist, so the response must fail, not end early.
			return meta.Errorf(rq.op.lower, rq.path, meta.ErrBusy, "file changed while being read at offset %d", pos)
		}
		if _, err := w.Write(chunk); err != nil {
			return nil // the client went away
		}
		h.m.bytesRead.Add(float64(len(chunk)))
		pos += int64(len(chunk))
		if pos < end {
			if chunk, err = h.fs.Read(rq.ctx(), rq.user, rq.path, pos, min(int64(h.cfg.ReadChunk), end-pos)); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinHostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
