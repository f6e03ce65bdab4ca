package consensus

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cairn-fs/cairn/internal/meta"
)

// Entry payloads (layout in doc.go).
const (
	payloadVersion    = 1
	confContextVer    = 1
	maxPayloadCommand = 1 << 20
)

var errBadPayload = errors.New("consensus: corrupt entry payload")

// encodePayload returns the data of a normal log entry: the proposer's node
// ID, the batch sequence number (for duplicate suppression, see doc.go), the
// proposal IDs (one per command) and the commands.
func encodePayload(node, seq uint64, ids []uint64, cmds []meta.Command) ([]byte, error) {
	body, err := meta.EncodeCommands(cmds)
	if err != nil {
		return nil, err
	}
	p := make([]byte, 0, 16+2*len(ids)+len(body))
	p = append(p, payloadVersion)
	p = binary.AppendUvarint(p, node)
	p = binary.AppendUvarint(p, seq)
	p = binary.AppendUvarint(p, uint64(len(ids)))
	var prev uint64
	for _, id := range ids {
		// IDs are allocated before proposals reach the loop, so they are
		// nearly but not strictly increasing: a signed delta stays short.
		p = binary.AppendVarint(p, int64(id-prev))
		prev = id
	}
	return append(p, body...), nil
}

// decodePayload is the inverse of encodePayload.
func decodePayload(p []byte) (node, seq uint64, ids []uint64, cmds []meta.Command, err error) {
	if len(p) == 0 || p[0] != payloadVersion {
		return 0, 0, nil, nil, fmt.Errorf("%w: version", errBadPayload)
	}
	p = p[1:]
	next := func() uint64 {
		if err != nil {
			return 0
		}
		v, n := binary.Uvarint(p)
		if n <= 0 {
			err = fmt.Errorf("%w: truncated header", errBadPayload)
			return 0
		}
		p = p[n:]
		return v
	}
	node = next()
	seq = next()
	n := next()
	if err == nil && n > maxPayloadCommand {
		err = fmt.Errorf("%w: %d commands", errBadPayload, n)
	}
	if err != nil {
		return 0, 0, nil, nil, err
	}
	ids = make([]uint64, n)
	var prev uint64
	for i := range ids {
		if err != nil {
			break
		}
		d, m := binary.Varint(p)
		if m <= 0 {
			err = fmt.Errorf("%w: truncated proposal ids", errBadPayload)
			break
		}
		p = p[m:]
		prev += uint64(d)
		ids[i] = prev
	}
	if err != nil {
		return 0, 0, nil, nil, err
	}
	cmds, err = meta.DecodeCommands(p)
	if err != nil {
		return 0, 0, nil, nil, err
	}
	if len(cmds) != len(ids) {
		return 0, 0, nil, nil, fmt.Errorf("%w: %d ids for %d commands", errBadPayload, len(ids), len(cmds))
	}
	return node, seq, ids, cmds, nil
}

// encodeConfContext is the Context of a ConfChangeV2 we propose: who
// proposed it, so that the proposer can wake its waiter.
func encodeConfContext(node, id uint64) []byte {
	p := []byte{confContextVer}
	p = binary.AppendUvarint(p, node)
	return binary.AppendUvarint(p, id)
}

func decodeConfContext(p []byte) (node, id uint64, ok bool) {
	if len(p) == 0 || p[0] != confContextVer {
		return 0, 0, false
	}
	p = p[1:]
	node, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, 0, false
	}
	id, m := binary.Uvarint(p[n:])
	if m <= 0 {
		return 0, 0, false
	}
	return node, id, true
}
