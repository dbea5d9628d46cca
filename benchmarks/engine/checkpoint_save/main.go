// checkpoint-save: one DIY-backend checkpoint save, timed, as the Pulumi engine does it in Go.
//
// The engine persists the whole snapshot after every mutation (pkg/backend/snapshot.go, `mutate`:
// one goroutine saves, the step waits), and a DIY backend's save is: serialise the checkpoint with
// the JSON marshaler its file extension selects (pkg/backend/diy/state.go, `saveCheckpoint`:
// `encoding.Detect(file)`, whose JSON marshaler indents with four spaces), back the old file up
// (`backupTarget`: copy to `<file>.bak`), write the new one (`bucket.WriteAll`).
//
// Usage: checkpoint-save STATE.json OUT_DIR REPEAT
// Reads STATE.json (a checkpoint), then REPEAT times: marshal it, copy OUT_DIR/stack.json to
// stack.json.bak, write stack.json. Prints one JSON line: bytes, marshal_ms, write_ms (the fastest
// of the REPEAT: on a shared machine noise only ever adds time).
// With OUT_DIR "-" it only marshals (the serialisation part of a save to any backend).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

func fastest(values []float64) float64 {
	sort.Float64s(values)
	return values[0]
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: checkpoint-save STATE.json OUT_DIR REPEAT")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var checkpoint interface{}
	if err := json.Unmarshal(raw, &checkpoint); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	repeat, err := strconv.Atoi(os.Args[3])
	if err != nil || repeat < 1 {
		fmt.Fprintln(os.Stderr, "REPEAT must be a positive integer")
		os.Exit(2)
	}
	file := filepath.Join(os.Args[2], "stack.json")
	var marshalMs, writeMs []float64
	size := 0
	for i := 0; i < repeat; i++ {
		start := time.Now()
		bytes, err := json.MarshalIndent(checkpoint, "", "    ")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		marshalMs = append(marshalMs, float64(time.Since(start).Microseconds())/1000)
		size = len(bytes)
		if os.Args[2] == "-" {
			continue
		}
		start = time.Now()
		if _, err := os.Stat(file); err == nil {
			if err := copyFile(file, file+".bak"); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		if err := os.WriteFile(file, bytes, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		writeMs = append(writeMs, float64(time.Since(start).Microseconds())/1000)
	}
	result := map[string]float64{"bytes": float64(size), "marshal_ms": fastest(marshalMs)}
	if len(writeMs) > 0 {
		result["write_ms"] = fastest(writeMs)
	}
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}
