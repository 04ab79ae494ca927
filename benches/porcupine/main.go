// The side-by-side of issue 22, item 6: one lockpick history of a single lease lock, checked
// for linearizability by Porcupine against a lease-lock model of our own, so that its time and
// memory can stand beside `lockpick check` on the same file.
//
// Only the lock's own ops go to Porcupine (acquire, renew, release); the register's reads and
// writes under the lock stay with lockpick, so Porcupine is given less to do, not more. The
// model is lenient wherever time matters: another client may be granted the lock once the
// holder's lease could have ended before the new grant answered, so a correct history never
// reads as illegal.
//
// Usage: porcupine-side-by-side HISTORY.jsonl TIMEOUT_S
// Prints one line: "ok", "illegal" or "unknown" (timed out), the ops given, and the seconds.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

type line struct {
	Time    int64           `json:"time_ns"`
	Process json.RawMessage `json:"process"`
	Type    string          `json:"type"`
	F       string          `json:"f"`
	Lock    string          `json:"lock"`
	Value   struct {
		Token       *int64 `json:"token"`
		TTLms       int64  `json:"ttl_ms"`
		LeaseLastOk int64  `json:"lease_last_ok_ns"`
		LeaseTTLms  int64  `json:"lease_ttl_ms"`
	} `json:"value"`
}

type input struct {
	f      string
	client int
}

type output struct {
	ok      bool
	token   int64
	leaseTo int64 // the earliest the granted or renewed lease may end, in the history's ns
	answer  int64 // when the answer came back
}

type state struct {
	holder  int // -1: free
	token   int64
	leaseTo int64
}

func step(s0 interface{}, in0 interface{}, out0 interface{}) (bool, interface{}) {
	s := s0.(state)
	in := in0.(input)
	out := out0.(output)
	if !out.ok {
		return true, s // a refusal changes nothing, and a correct lock may refuse
	}
	switch in.f {
	case "acquire":
		free := s.holder < 0 || s.leaseTo <= out.answer
		if !free || out.token <= s.token {
			return false, s
		}
		return true, state{holder: in.client, token: out.token, leaseTo: out.leaseTo}
	case "renew":
		if s.holder != in.client {
			return false, s
		}
		return true, state{holder: s.holder, token: s.token, leaseTo: out.leaseTo}
	case "release":
		if s.holder != in.client {
			return false, s
		}
		return true, state{holder: -1, token: s.token}
	}
	return true, s
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: porcupine-side-by-side HISTORY.jsonl TIMEOUT_S")
		os.Exit(2)
	}
	timeoutS, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "TIMEOUT_S:", err)
		os.Exit(2)
	}
	began := time.Now()
	file, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer file.Close()
	pending := map[int]porcupine.Operation{}
	var ops []porcupine.Operation
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; scanner.Scan(); n++ {
		var l line
		if err := json.Unmarshal(scanner.Bytes(), &l); err != nil {
			fmt.Fprintf(os.Stderr, "%s:%d: %v\n", os.Args[1], n, err)
			os.Exit(2)
		}
		process, err := strconv.Atoi(string(l.Process))
		if err != nil || (l.F != "acquire" && l.F != "renew" && l.F != "release") {
			continue // the nemesis's events, and the register's ops
		}
		switch l.Type {
		case "invoke":
			pending[process] = porcupine.Operation{
				ClientId: process,
				Input:    input{f: l.F, client: process},
				Call:     l.Time,
			}
		case "ok", "fail":
			op, found := pending[process]
			if !found {
				continue
			}
			delete(pending, process)
			out := output{ok: l.Type == "ok", answer: l.Time}
			if l.Value.Token != nil {
				out.token = *l.Value.Token
			}
			ttl := l.Value.LeaseTTLms
			if ttl == 0 {
				ttl = l.Value.TTLms
			}
			out.leaseTo = l.Value.LeaseLastOk + ttl*1_000_000
			op.Output = out
			op.Return = l.Time
			ops = append(ops, op)
		default:
			// An indeterminate answer: the histories given here have none (synth --info-rate 0).
			fmt.Fprintf(os.Stderr, "%s:%d: %q answers are not modelled\n", os.Args[1], n, l.Type)
			os.Exit(2)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	model := porcupine.Model{
		Init: func() interface{} { return state{holder: -1} },
		Step: step,
	}
	result := porcupine.CheckOperationsTimeout(model, ops, time.Duration(timeoutS)*time.Second)
	verdict := map[porcupine.CheckResult]string{
		porcupine.Ok: "ok", porcupine.Illegal: "illegal", porcupine.Unknown: "unknown",
	}[result]
	fmt.Printf("%s %d %.3f\n", verdict, len(ops), time.Since(began).Seconds())
}
