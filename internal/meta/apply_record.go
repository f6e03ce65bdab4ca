package meta

import (
	"fmt"
	"strconv"
)

// checkRecord validates the record of an OpPutRecord/OpDeleteRecord.
func (a *applier) checkRecord(put bool) (*Record, error) {
	rec := a.cmd.Record
	switch {
	case rec == nil:
		return nil, fmt.Errorf("%w: %v without Record", ErrInvalid, a.cmd.Op)
	case rec.Kind != RecordKey && rec.Kind != RecordRule && rec.Kind != RecordLock && rec.Kind != RecordSnapSchedule &&
		rec.Kind != RecordGroup && rec.Kind != RecordMove:
		return nil, fmt.Errorf("%w: record kind %q", ErrInvalid, rec.Kind)
	case len(rec.Name) > MaxRecordName:
		return nil, fmt.Errorf("%w: record name longer than %d bytes", ErrInvalid, MaxRecordName)
	case !put && rec.Name == "":
		return nil, fmt.Errorf("%w: record without a name", ErrInvalid)
	case put && len(rec.Value) > MaxRecordValue:
		return nil, fmt.Errorf("%w: record value of %d bytes, more than %d", ErrInvalid, len(rec.Value), MaxRecordValue)
	}
	return rec, nil
}

func (a *applier) putRecord() (Result, error) {
	rec, err := a.checkRecord(true)
	if err != nil {
		return Result{}, err
	}
	name := rec.Name
	if name == "" {
		seq, err := a.r.getU64(seqKey(rec.Kind))
		if err != nil {
			return Result{}, err
		}
		seq++
		a.t.set(seqKey(rec.Kind), u64(seq))
		name = strconv.FormatUint(seq, 10)
	}
	key := recordKey(rec.Kind, name)
	if a.cmd.IfNoneMatchAny {
		if _, ok, err := a.r.get(key); err != nil {
			return Result{}, err
		} else if ok {
			return Result{}, fmt.Errorf("record %q: %w", name, ErrExists)
		}
	}
	a.t.set(key, append([]byte{recordVersion}, rec.Value...))
	return Result{Name: name}, nil
}

func (a *applier) deleteRecord() (Result, error) {
	rec, err := a.checkRecord(false)
	if err != nil {
		return Result{}, err
	}
	key := recordKey(rec.Kind, rec.Name)
	if _, ok, err := a.r.get(key); err != nil {
		return Result{}, err
	} else if !ok {
		return Result{}, fmt.Errorf("record %q: %w", rec.Name, ErrNotFound)
	}
	a.t.del(key)
	return Result{Name: rec.Name}, nil
}
