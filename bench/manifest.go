package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nimbus-fs/nimbus/meta"
)

// ManifestName is the file prepare writes in the tree's root so that later
// runs can rebuild the same Tree without being told its parameters.
const ManifestName = ".nimbus-bench-manifest.json"

// Manifest records how a prepared tree was generated.
type Manifest struct {
	Tree     TreeConfig `json:"tree"`
	FileSize int        `json:"file_size"` // bytes in every file
	Created  time.Time  `json:"created"`
	Complete bool       `json:"complete"` // false while prepare runs
}

// ManifestPath returns where the manifest of a tree rooted at root lives.
func ManifestPath(root string) string { return meta.JoinPath(root, ManifestName) }

// WriteManifest stores m in the target, replacing any older one.
func WriteManifest(ctx context.Context, env *Env, m Manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("bench: encode manifest: %w", err)
	}
	if err := createFile(ctx, env, ManifestPath(m.Tree.Root), b, true); err != nil {
		return fmt.Errorf("bench: write manifest: %w", err)
	}
	return nil
}

// ReadManifest loads the manifest of the tree at root. The error wraps
// meta.ErrNotFound when no tree was prepared there.
func ReadManifest(ctx context.Context, env *Env, root string) (*Manifest, error) {
	p := ManifestPath(root)
	b, err := env.FS.Read(ctx, env.User, p, 0, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("bench: read manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("bench: manifest %s: %w", p, err)
	}
	if err := m.Tree.Validate(); err != nil {
		return nil, fmt.Errorf("bench: manifest %s: %w", p, err)
	}
	return &m, nil
}
