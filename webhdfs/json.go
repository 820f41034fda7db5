package webhdfs

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/nimbus-fs/nimbus/meta"
)

// The JSON shapes below follow Hadoop's JsonUtil field for field; those the
// benchmark's client reads too live in package wire.

type quotaUsageJSON struct {
	FileAndDirectoryCount int64    `json:"fileAndDirectoryCount"`
	Quota                 int64    `json:"quota"`
	SpaceConsumed         int64    `json:"spaceConsumed"`
	SpaceQuota            int64    `json:"spaceQuota"`
	TypeQuota             struct{} `json:"typeQuota"`
}

type serverDefaultsJSON struct {
	BlockSize              int64  `json:"blockSize"`
	BytesPerChecksum       int    `json:"bytesPerChecksum"`
	WritePacketSize        int    `json:"writePacketSize"`
	Replication            uint16 `json:"replication"`
	FileBufferSize         int    `json:"fileBufferSize"`
	EncryptDataTransfer    bool   `json:"encryptDataTransfer"`
	TrashInterval          int64  `json:"trashInterval"`
	ChecksumType           int    `json:"checksumType"` // DataChecksum.Type id: 2 is CRC32C
	KeyProviderURI         string `json:"keyProviderUri"`
	DefaultStoragePolicyID int    `json:"defaultStoragePolicyId"`
}

type fileChecksumJSON struct {
	Algorithm string `json:"algorithm"`
	Bytes     string `json:"bytes"`
	Length    int    `json:"length"`
}

type blockLocationJSON struct {
	CachedHosts   []string `json:"cachedHosts"`
	Corrupt       bool     `json:"corrupt"`
	Hosts         []string `json:"hosts"`
	Length        int64    `json:"length"`
	Names         []string `json:"names"`
	Offset        int64    `json:"offset"`
	StorageIDs    []string `json:"storageIds"`
	StorageTypes  []string `json:"storageTypes"`
	TopologyPaths []string `json:"topologyPaths"`
}

type datanodeInfoJSON struct {
	IPAddr              string `json:"ipAddr"`
	Name                string `json:"name"`
	HostName            string `json:"hostName"`
	StorageID           string `json:"storageID"`
	XferPort            int    `json:"xferPort"`
	InfoPort            int    `json:"infoPort"`
	InfoSecurePort      int    `json:"infoSecurePort"`
	IPCPort             int    `json:"ipcPort"`
	Capacity            int64  `json:"capacity"`
	DfsUsed             int64  `json:"dfsUsed"`
	NonDfsUsed          int64  `json:"nonDfsUsed"`
	Remaining           int64  `json:"remaining"`
	BlockPoolUsed       int64  `json:"blockPoolUsed"`
	CacheCapacity       int64  `json:"cacheCapacity"`
	CacheUsed           int64  `json:"cacheUsed"`
	LastUpdate          int64  `json:"lastUpdate"`
	LastUpdateMonotonic int64  `json:"lastUpdateMonotonic"`
	XceiverCount        int    `json:"xceiverCount"`
	NetworkLocation     string `json:"networkLocation"`
	AdminState          string `json:"adminState"`
}

type extendedBlockJSON struct {
	BlockPoolID     string `json:"blockPoolId"`
	BlockID         uint64 `json:"blockId"`
	NumBytes        int64  `json:"numBytes"`
	GenerationStamp int64  `json:"generationStamp"`
}

type locatedBlockJSON struct {
	Block           extendedBlockJSON  `json:"block"`
	BlockToken      map[string]string  `json:"blockToken"`
	CachedLocations []datanodeInfoJSON `json:"cachedLocations"`
	IsCorrupt       bool               `json:"isCorrupt"`
	Locations       []datanodeInfoJSON `json:"locations"`
	StartOffset     int64              `json:"startOffset"`
	StorageTypes    []string           `json:"storageTypes"`
}

type locatedBlocksJSON struct {
	FileLength          int64              `json:"fileLength"`
	IsLastBlockComplete bool               `json:"isLastBlockComplete"`
	IsUnderConstruction bool               `json:"isUnderConstruction"`
	LastLocatedBlock    *locatedBlockJSON  `json:"lastLocatedBlock"`
	LocatedBlocks       []locatedBlockJSON `json:"locatedBlocks"`
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return meta.Errorf("webhdfs", "", meta.ErrInternal, "encoding response: %v", err)
	}
	return writeBody(w, status, append(b, '\n'))
}

var (
	trueBody  = []byte("{\"boolean\":true}\n")
	falseBody = []byte("{\"boolean\":false}\n")
)

// writeBoolean sends {"boolean": b}.
func writeBoolean(w http.ResponseWriter, b bool) error {
	if b {
		return writeBody(w, http.StatusOK, trueBody)
	}
	return writeBody(w, http.StatusOK, falseBody)
}

// writeBody sends status with the JSON body b, in one write with its length.
func writeBody(w http.ResponseWriter, status int, b []byte) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}

// writeBuilt sends 200 with the JSON body build appends to a pooled buffer.
func writeBuilt(w http.ResponseWriter, build func(b []byte) []byte) error {
	bp := bodyPool.Get().(*[]byte)
	b := build((*bp)[:0])
	err := writeBody(w, http.StatusOK, b)
	*bp = b
	putBody(bp)
	return err
}

// bodyPool recycles response buffers of listings and statuses.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// putBody returns a buffer to bodyPool unless a huge listing grew it.
func putBody(bp *[]byte) {
	if cap(*bp) <= 1<<20 {
		bodyPool.Put(bp)
	}
}

// writeEmpty sends 200 with no body, as Hadoop does for SETPERMISSION and
// the other setters.
func writeEmpty(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
	return nil
}
