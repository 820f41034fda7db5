package client

import (
	"context"
	"strconv"

	"github.com/nimbus-fs/nimbus/dataxfer/blocktoken"
	"github.com/nimbus-fs/nimbus/dfsio"
	"github.com/nimbus-fs/nimbus/meta"
	"github.com/nimbus-fs/nimbus/namespace"
)

// NameNode returns the client as the NameNode of package dfsio's streams
// (dfsio.WriterConfig.NameNode, dfsio.ReaderConfig.NameNode), calling as
// user u: each call is the RPC of the same name (client/datapath.go).
func (c *Client) NameNode(u meta.User) dfsio.NameNode { return dfsioNameNode{c: c, u: u} }

type dfsioNameNode struct {
	c *Client
	u meta.User
}

func toRef(b dfsio.BlockRef) namespace.BlockRef {
	return namespace.BlockRef{ID: b.ID, GenStamp: b.GenStamp, NumBytes: b.NumBytes}
}

func toLoc(l dfsio.Location) namespace.Location {
	return namespace.Location{Host: l.Host, Zone: l.Zone}
}

func fromLocated(b *namespace.LocatedBlock) *dfsio.LocatedBlock {
	if b == nil {
		return nil
	}
	out := &dfsio.LocatedBlock{Pool: b.Pool, ID: b.ID, GenStamp: b.GenStamp, NumBytes: b.NumBytes, Offset: b.Offset,
		Corrupt: b.Corrupt, Token: blocktoken.Token{Identifier: b.Token.Identifier, Password: b.Token.Password,
			Kind: b.Token.Kind, Service: b.Token.Service}}
	if len(b.Targets) > 0 {
		out.Targets = make([]dfsio.DataNodeInfo, len(b.Targets))
		for i, t := range b.Targets {
			out.Targets[i] = dfsio.DataNodeInfo(t)
		}
	}
	return out
}

func (n dfsioNameNode) AddBlock(ctx context.Context, path, client string, previous *dfsio.BlockRef, exclude []uint64, writer dfsio.Location) (*dfsio.LocatedBlock, error) {
	var prev *namespace.BlockRef
	if previous != nil {
		r := toRef(*previous)
		prev = &r
	}
	lb, err := n.c.AddBlock(ctx, n.u, path, client, prev, exclude, toLoc(writer))
	return fromLocated(lb), err
}

func (n dfsioNameNode) CompleteBlock(ctx context.Context, path, client string, last *dfsio.BlockRef) error {
	var l *namespace.BlockRef
	if last != nil {
		r := toRef(*last)
		l = &r
	}
	_, err := n.c.CompleteBlock(ctx, n.u, path, client, l)
	return err
}

func (n dfsioNameNode) GetBlockLocations(ctx context.Context, path string, offset, length int64, reader dfsio.Location) (*dfsio.LocatedBlocks, error) {
	l, err := n.c.GetBlockLocations(ctx, n.u, path, offset, length, toLoc(reader))
	if err != nil {
		return nil, err
	}
	out := &dfsio.LocatedBlocks{FileLength: l.FileLength, UnderConstruction: l.UnderConstruction,
		LastBlock: fromLocated(l.LastBlock), LastBlockComplete: l.LastBlockComplete, Inline: l.Inline}
	if len(l.Blocks) > 0 {
		out.Blocks = make([]dfsio.LocatedBlock, len(l.Blocks))
		for i := range l.Blocks {
			out.Blocks[i] = *fromLocated(&l.Blocks[i])
		}
	}
	return out, nil
}

func (n dfsioNameNode) UpdateBlockForPipeline(ctx context.Context, path, client string, block dfsio.BlockRef) (*dfsio.LocatedBlock, error) {
	lb, err := n.c.UpdateBlockForPipeline(ctx, n.u, path, client, toRef(block))
	return fromLocated(lb), err
}

func (n dfsioNameNode) UpdatePipeline(ctx context.Context, path, client string, old, updated dfsio.BlockRef, nodes []uint64) error {
	return n.c.UpdatePipeline(ctx, n.u, path, client, toRef(old), toRef(updated), nodes)
}

func (n dfsioNameNode) AbandonBlock(ctx context.Context, path, client string, block dfsio.BlockRef) error {
	return n.c.AbandonBlock(ctx, n.u, path, client, toRef(block))
}

func (n dfsioNameNode) Fsync(ctx context.Context, path, client string, lastBlockLength int64) error {
	return n.c.Fsync(ctx, n.u, path, client, lastBlockLength)
}

func (n dfsioNameNode) AdditionalDataNode(ctx context.Context, path, client string, block dfsio.BlockRef, existing, exclude []uint64, k int, writer dfsio.Location) (*dfsio.LocatedBlock, error) {
	lb, err := n.c.AdditionalDataNode(ctx, n.u, path, client, toRef(block), existing, exclude, k, toLoc(writer))
	return fromLocated(lb), err
}

// ReportBadBlocks answers unsupported: the engine has no call recording
// corrupt replicas a client found (a replica is corrupt when its DataNode
// reports it so), hence no RPC. dfsio logs the answer and reads another
// replica.
func (n dfsioNameNode) ReportBadBlocks(ctx context.Context, blocks []dfsio.LocatedBlock) error {
	p := ""
	if len(blocks) > 0 {
		p = "blk_" + strconv.FormatUint(blocks[0].ID, 10)
	}
	return meta.Errorf("reportBadBlocks", p, meta.ErrUnsupported, "the NameNode takes no reports of corrupt replicas from clients")
}
