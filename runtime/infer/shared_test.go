package infer

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// The AuxUE that owns its inputs reads the depth model's image input from
// the depth session's own tensor (no copy per run). Its outputs must be
// bitwise those of an AuxUE session with a buffer of its own filled by
// copying, as before; a shared buffer of another frame size is not used.
func TestAuxUESharesTheImageInput(t *testing.T) {
	ctx := context.Background()
	for _, p := range modelPairs(t) {
		t.Run(p.name, func(t *testing.T) {
			if !p.auxueSpec.OwnsInputs() {
				t.Fatalf("%s: the AuxUE does not own its inputs; this test needs one that does", p.name)
			}
			m := openPair(t, p, 1)
			if !m.aux.InputShared(0) {
				t.Fatal("the AuxUE's image input is not the depth model's tensor")
			}
			if m.aux.InputShared(1) {
				t.Fatal("the AuxUE's depth input is shared, but only the image input should be")
			}
			frames, ws, hs := batchFrames(1, p.depthSpec.Input.Width, p.depthSpec.Input.Height)
			maps, err := m.Infer(ctx, frames[0], ws[0], hs[0])
			if err != nil {
				t.Fatal(err)
			}
			scale, epi := clone(m.aux.Output(0)), clone(m.aux.Output(1))
			if len(maps.Scale) == 0 {
				t.Fatal("no scale map")
			}

			own, err := NewSession(ctx, p.aux, p.auxueSpec, onnxrt.Config{IntraOpThreads: 1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer own.Close()
			if own.InputShared(0) {
				t.Fatal("a session opened without SharedInputs reports a shared input")
			}
			copy(own.InputAt(0), m.depth.Input())
			copy(own.InputAt(1), m.aux.InputAt(1))
			if _, err := own.Run(ctx); err != nil {
				t.Fatal(err)
			}
			for j, pair := range [][2][]float32{{scale, own.Output(0)}, {epi, own.Output(1)}} {
				for i := range pair[0] {
					if pair[0][i] != pair[1][i] {
						t.Fatalf("output %d value %d: %g with the shared input, %g with a copied one", j, i, pair[0][i], pair[1][i])
					}
				}
			}

			// Memory of frames of another size is refused (the session
			// then has a buffer of its own).
			odd := make([]float32, 4*(len(m.depth.Input())+1))
			other, err := OpenSession(ctx, p.aux, p.auxueSpec, onnxrt.Config{IntraOpThreads: 1},
				SessionOptions{SharedInputs: []SharedInput{{Data: odd, FrameSize: len(m.depth.Input()) + 1}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if other.InputShared(0) {
				t.Fatal("shared memory of another frame size was used")
			}
		})
	}
}

// SkipAlpha: the reference AuxUE opened without fetching alpha has only
// scale and epistemic outputs, and they are bit for bit those of the
// session that fetches alpha too; a spec whose K does not match the
// model's alpha is still refused.
func TestSkipAlpha(t *testing.T) {
	ref := modelPairs(t)[1]
	ctx := context.Background()
	cfg := onnxrt.Config{IntraOpThreads: 1}
	full := newSession(t, ref.aux, ref.auxueSpec, cfg, nil)
	skip, err := OpenSession(ctx, ref.aux, ref.auxueSpec, cfg, SessionOptions{SkipAlpha: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer skip.Close()
	if got := strings.Join(skip.OutputNames(), ","); got != "scale,epistemic" {
		t.Fatalf("outputs %s, want scale,epistemic", got)
	}
	if got := strings.Join(full.OutputNames(), ","); got != "scale,epistemic,alpha" {
		t.Fatalf("outputs of the full session %s", got)
	}
	for i := range 2 {
		in := full.InputAt(i)
		for k := range in {
			in[k] = float32(k%97)*0.01 + float32(i)
		}
		copy(skip.InputAt(i), in)
	}
	if _, err := full.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := skip.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !slices.Equal(skip.Output(i), full.Output(i)) {
			t.Fatalf("output %s differs without alpha", full.OutputNames()[i])
		}
	}
	wrong := ref.auxueSpec
	a := *wrong.AuxUE
	a.K = 8
	wrong.AuxUE = &a
	if _, err := OpenSession(ctx, ref.aux, wrong, cfg, SessionOptions{SkipAlpha: true}, nil); err == nil || !strings.Contains(err.Error(), "auxue.k: 8") {
		t.Fatalf("k 8 against a 32-bin alpha with SkipAlpha: %v", err)
	}
}
