package infer

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/didoedge/didoedge/runtime/infer/onnxrt"
)

// The device-resident path (docs/deploy.md, "Device-resident tensors").
//
// The host path binds host tensors: with CUDA, ONNX Runtime copies every
// input to the GPU and every output back on each run, so the image goes
// up twice (depth model and AuxUE), and the depth map and the feature
// tensor go down and up again between the two models. The device path
// binds, through the project's own cgo over the OrtApi table
// (device_cgo.go), tensors in the models' device memory (allocated with
// the depth session's allocator for an OrtMemoryInfo "Cuda", device id of
// the provider), so that
//   - the image is uploaded once per frame, before the depth run, and the
//     AuxUE's image input is the same device tensor;
//   - the depth model's outputs stay on the device; the AuxUE's depth and
//     model_features inputs are those same device tensors;
//   - only the maps come back: the depth map (the alerts read it, and its
//     read-out is computed on the host) and the AuxUE's scale and K/S.
//
// The AuxUE's depth input is the read-out of the raw output. When the
// read-out is the identity (A = 1, B = 0, not inverse: a metric or
// relative model without scale) and changed no value of the frame (no
// value clamped to 0), the raw device tensor is it; otherwise (a scale,
// an inverse, a clamped value, a depth grid other than the input's) the
// host read-out is uploaded into the tensor the AuxUE reads, one map per
// frame. Features-input AuxUEs (their input is assembled on the host,
// with a scale) and models with non-float32 tensors stay on the host path.
//
// Copies are explicit and timed (StageTimes.Copy): with CUDA through the
// CUDA runtime's cudaMemcpy (the libcudart the CUDA provider loaded), on
// the CPU path memcpy. OrtApi::CopyTensors is not used: it copies only
// through the data transfers of providers registered in the environment
// (plugin EPs); with the CPU provider alone it answers "Data transfer
// implementation between source and destination device was not found".
// Nor does an IoBinding copy per run: BindInput copies a host value to
// the session's device once, at bind time.
//
// The bindings are made once (per batch size n, views of the first n
// frames) and every bound value is in the session's own memory, so a run
// binds nothing and copies only what it must.
type devIO struct {
	api     *onnxrt.DevAPI
	session unsafe.Pointer // the OrtSession* the bindings belong to
	mem     unsafe.Pointer // OrtMemoryInfo of the tensors
	alloc   unsafe.Pointer // the session's allocator for mem (nil when it owns no tensor)
	ins     []devTensor
	outs    []devTensor
	binds   []unsafe.Pointer // OrtIoBinding per batch size n (index n-1)
	values  []unsafe.Pointer // OrtValues it owns: tensors, then views
	owned   int              // of values, the allocated tensors (first)
	term    unsafe.Pointer   // OrtRunOptions with the terminate flag (injected faults)
	// live counts OrtValues, bindings and the other ONNX Runtime objects
	// this devIO holds (TestDeviceNoLeak).
	live int
}

// devTensor is one input or output in device memory: frame k of a batch
// at ptr + k*per values.
type devTensor struct {
	ptr      unsafe.Pointer
	per      int
	upload   bool // an input copied from the session's host tensor before each run
	download bool // an output copied to the session's host tensor after each run
	borrowed bool // memory of another session (the depth model's)
}

// devSpec says how to lay out a session's device tensors: memory name and
// device, the inputs borrowed from another session (nil = allocate), and
// which inputs to upload and outputs to download on each run.
type devSpec struct {
	mem      string // "Cuda" or "Cpu"
	device   int
	borrow   []unsafe.Pointer
	upload   []bool
	download []bool
}

// openDevice builds the session's device tensors and bindings. On error
// nothing is left allocated and the session stays on the host path.
func (s *Session) openDevice(api *onnxrt.DevAPI, ds devSpec) (err error) {
	ptr, err := s.sessionPointer()
	if err != nil {
		return err
	}
	for i, c := range append(append([]*onnxrt.Cast(nil), s.inCast...), s.outCast...) {
		if c != nil {
			return fmt.Errorf("model %q: tensor %d is not float32", s.path, i)
		}
	}
	d := &devIO{api: api, session: ptr}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.mem, err = api.MemoryInfo(ds.mem, ds.device); err != nil {
		return err
	}
	d.live++
	allocate := func(sh ort.Shape) (unsafe.Pointer, error) {
		if d.alloc == nil {
			if d.alloc, err = api.Allocator(ptr, d.mem); err != nil {
				return nil, err
			}
			d.live++
		}
		v, data, err := api.Tensor(d.alloc, onnxrt.WithBatch(sh, s.maxBatch))
		if err != nil {
			return nil, err
		}
		d.values = append(d.values, v)
		d.owned++
		d.live++
		return data, nil
	}
	for i, sh := range s.inShapes {
		t := devTensor{per: s.inPer[i], upload: i < len(ds.upload) && ds.upload[i]}
		if i < len(ds.borrow) && ds.borrow[i] != nil {
			t.ptr, t.borrowed = ds.borrow[i], true
		} else if t.ptr, err = allocate(sh); err != nil {
			return fmt.Errorf("model %q: input %d: %w", s.path, i, err)
		}
		d.ins = append(d.ins, t)
	}
	for i := range s.outputs {
		t := devTensor{per: s.outPer[i], download: i < len(ds.download) && ds.download[i]}
		if t.ptr, err = allocate(onnxrt.WithBatch(s.outputs[i].GetShape(), 1)); err != nil {
			return fmt.Errorf("model %q: output %q: %w", s.path, s.outNames[i], err)
		}
		d.outs = append(d.outs, t)
	}
	inNames := s.spec.inputNames()
	for n := 1; n <= s.maxBatch; n++ {
		b, err := api.Binding(ptr)
		if err != nil {
			return err
		}
		d.binds = append(d.binds, b)
		d.live++
		bind := func(name string, t devTensor, sh ort.Shape, output bool) error {
			v, err := api.View(d.mem, t.ptr, onnxrt.WithBatch(sh, n))
			if err != nil {
				return err
			}
			d.values = append(d.values, v)
			d.live++
			return api.Bind(b, name, v, output)
		}
		for i, t := range d.ins {
			if err := bind(inNames[i], t, s.inShapes[i], false); err != nil {
				return fmt.Errorf("model %q: batch %d: %w", s.path, n, err)
			}
		}
		for i, t := range d.outs {
			if err := bind(s.outNames[i], t, s.outputs[i].GetShape(), true); err != nil {
				return fmt.Errorf("model %q: batch %d: %w", s.path, n, err)
			}
		}
	}
	s.dev = d
	return nil
}

// close releases the bindings, the views, the tensors (after the views
// over them), the allocator and the memory info.
func (d *devIO) close() {
	if d == nil {
		return
	}
	a := d.api
	for _, b := range d.binds {
		a.Release(onnxrt.RelIoBinding, b)
		d.live--
	}
	d.binds = nil
	for i := len(d.values) - 1; i >= 0; i-- {
		a.Release(onnxrt.RelValue, d.values[i])
		d.live--
	}
	d.values = nil
	if d.alloc != nil {
		a.Release(onnxrt.RelAllocator, d.alloc)
		d.alloc = nil
		d.live--
	}
	if d.mem != nil {
		a.Release(onnxrt.RelMemoryInfo, d.mem)
		d.mem = nil
		d.live--
	}
	if d.term != nil {
		a.Release(onnxrt.RelRunOptions, d.term)
		d.term = nil
		d.live--
	}
}

// closeDevice drops the session's device path (a rebuild makes a new
// OrtSession that the bindings do not belong to; Close).
func (s *Session) closeDevice() {
	if s.dev != nil {
		s.dev.close()
		s.dev = nil
	}
}

// DeviceResident reports whether the session runs on device-resident
// tensors (Models enables it: inference.device_tensors).
func (s *Session) DeviceResident() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dev != nil
}

// deviceLive counts the ONNX Runtime objects of the device path (tests).
func (s *Session) deviceLive() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dev == nil {
		return 0
	}
	return s.dev.live
}

// runDevice is one run on the device binding of batch n.
func (d *devIO) run(n int, terminate bool) error {
	var opts unsafe.Pointer
	if terminate {
		if d.term == nil {
			t, err := d.api.TerminateOptions()
			if err != nil {
				return err
			}
			d.term = t
			d.live++
		}
		opts = d.term
	}
	err := d.api.Run(d.session, opts, d.binds[n-1])
	if terminate && err == nil {
		return errors.New("injected fault: ONNX Runtime ran despite its terminate flag")
	}
	return err
}

// hostPtr is frame k of a host tensor.
func hostPtr(t *ort.Tensor[float32], k, per int) unsafe.Pointer {
	return unsafe.Pointer(&t.GetData()[k*per])
}

// devPtr is frame k of a device tensor.
func (t devTensor) at(k int) unsafe.Pointer { return unsafe.Add(t.ptr, 4*k*t.per) }

// uploadInputs copies the first n frames of the inputs marked upload from
// the host tensors to the device.
func (s *Session) uploadInputs(n int) error {
	for i, t := range s.dev.ins {
		if t.upload {
			if err := s.dev.api.Copy(t.ptr, hostPtr(s.inputs[i], 0, t.per), n*t.per); err != nil {
				return fmt.Errorf("model %q: upload input %d: %w", s.path, i, err)
			}
		}
	}
	return nil
}

// downloadOutputs copies the first n frames of the outputs marked
// download from the device to the host tensors.
func (s *Session) downloadOutputs(n int) error {
	for i, t := range s.dev.outs {
		if t.download {
			if err := s.dev.api.Copy(hostPtr(s.outputs[i], 0, t.per), t.ptr, n*t.per); err != nil {
				return fmt.Errorf("model %q: download output %q: %w", s.path, s.outNames[i], err)
			}
		}
	}
	return nil
}

// uploadOutputSlot writes src over frame k of output i on the device (the
// depth read-out over the raw depth the AuxUE reads). It returns the copy
// time.
func (s *Session) uploadOutputSlot(i, k int, src []float32) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dev == nil {
		return 0, errors.New("no device tensors")
	}
	t := s.dev.outs[i]
	if len(src) != t.per {
		return 0, fmt.Errorf("model %q: upload %d values over output %q of %d", s.path, len(src), s.outNames[i], t.per)
	}
	t0 := time.Now()
	if err := s.dev.api.Copy(t.at(k), unsafe.Pointer(&src[0]), t.per); err != nil {
		return 0, fmt.Errorf("model %q: upload over output %q: %w", s.path, s.outNames[i], err)
	}
	return time.Since(t0), nil
}

// modelsDev is the device-path state Models and its views share.
type modelsDev struct {
	on bool
	// depthShared: the AuxUE's depth input is the depth model's raw output
	// tensor on the device (the read-out is uploaded over it when it
	// differs).
	depthShared bool
	mem         string
	// api holds the copies' CUDA stream (DevAPI.Close frees it): closed
	// when the path turns off or the models close, after both sessions'
	// device tensors.
	api *onnxrt.DevAPI
}

// closeAPI frees the device API once the sessions dropped their tensors.
func (d *modelsDev) closeAPI() error {
	if d == nil || d.api == nil {
		return nil
	}
	err := d.api.Close()
	d.api = nil
	return err
}

// deviceMemory decides the memory of the device path: "Cuda" or "Cpu",
// or "" with the reason for the host path.
func (m *Models) deviceMemory() (mem string, device int, reason string) {
	mode := m.cfg.Inference.DeviceTensors
	if mode == "" {
		mode = onnxrt.DeviceTensorsAuto
	}
	switch {
	case mode == onnxrt.DeviceTensorsOff:
		return "", 0, "inference.device_tensors: off"
	case m.aux == nil:
		return "", 0, "no AuxUE"
	case !m.cfg.AuxUESpec.OwnsInputs():
		return "", 0, "a features-input AuxUE: its input is assembled on the host"
	case len(m.cfg.DepthTensors) > 0:
		return "", 0, "exposed depth tensors are read on the host"
	case m.depth.MaxBatch() != m.aux.MaxBatch():
		return "", 0, "the models' batch sizes differ"
	}
	dp, ap := m.depth.Provider(), m.aux.Provider()
	dc, ac := m.depth.providers[m.depth.providerIdx], m.aux.providers[m.aux.providerIdx]
	switch {
	case dp == onnxrt.ProviderCUDA && ap == onnxrt.ProviderCUDA && dc.DeviceID == ac.DeviceID:
		return "Cuda", dc.DeviceID, ""
	case mode == onnxrt.DeviceTensorsOn && dp == onnxrt.ProviderCPU && ap == onnxrt.ProviderCPU:
		return "Cpu", 0, ""
	}
	return "", 0, fmt.Sprintf("the depth model runs on %s and the AuxUE on %s (device tensors need both on cuda, one device)", dp, ap)
}

// setupDevice enables the device path when the config and the sessions
// allow it; otherwise (or when it fails to build) the host path stays,
// with one line saying why.
func (m *Models) setupDevice(log *slog.Logger) {
	m.dev = &modelsDev{}
	mem, device, reason := m.deviceMemory()
	if mem == "" {
		if m.cfg.Inference.DeviceTensors == onnxrt.DeviceTensorsOn || (m.aux != nil && m.depth.Provider() == onnxrt.ProviderCUDA) {
			log.Warn("device-resident tensors off: host path", "reason", reason)
		}
		return
	}
	if err := m.openDevice(mem, device); err != nil {
		log.Warn("device-resident tensors failed to set up: host path", "memory", mem, "err", oneLine(err))
		return
	}
	log.Info("device-resident tensors", "memory", mem, "device", device, "depth_handoff", map[bool]string{true: "raw output on the device", false: "read-out uploaded"}[m.dev.depthShared])
}

func (m *Models) openDevice(mem string, device int) (err error) {
	lib := m.depth.lib.Path
	dapi, err := onnxrt.NewDevAPI(lib, mem == "Cuda", device)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			dapi.Close() // the sessions closed their tensors on the way out
		}
	}()
	d, a := m.depth, m.aux
	nOut := len(d.outputs)
	dl := make([]bool, nOut)
	dl[0] = true // the depth map: the alerts read it
	if m.confOut >= 0 {
		dl[m.confOut] = true // the model's confidence: the alerts read it too
	}
	if err := d.openDevice(dapi, devSpec{mem: mem, device: device, upload: []bool{true}, download: dl}); err != nil {
		return err
	}
	dev := m.dev
	dev.depthShared = m.toInput == nil && a.inPer[1] == d.outPer[0]
	borrow := []unsafe.Pointer{d.dev.ins[0].ptr, nil}
	if a.inPer[0] != d.inPer[0] {
		d.closeDevice()
		return fmt.Errorf("the AuxUE's image input has %d values per frame, the depth model's %d", a.inPer[0], d.inPer[0])
	}
	if dev.depthShared {
		borrow[1] = d.dev.outs[0].ptr
	}
	if m.featOut >= 0 {
		if len(a.inPer) < 3 || a.inPer[2] != d.outPer[m.featOut] {
			d.closeDevice()
			return errors.New("the AuxUE's model_features input does not match the depth model's tensor")
		}
		borrow = append(borrow, d.dev.outs[m.featOut].ptr)
	}
	upload := []bool{false, !dev.depthShared}
	if err := a.openDevice(dapi, devSpec{mem: mem, device: device, borrow: borrow, upload: upload, download: []bool{true, true}}); err != nil {
		d.closeDevice()
		return err
	}
	dev.on, dev.mem, dev.api = true, mem, dapi
	return nil
}

// deviceOn reports whether this frame runs on the device path; a session
// that dropped its device tensors (a rebuild after a fault) turns the
// path off for both models, AuxUE first (its bindings view the depth
// model's memory).
func (m *Models) deviceOn() bool {
	if m.dev == nil || !m.dev.on {
		return false
	}
	if m.depth.DeviceResident() && m.aux.DeviceResident() {
		return true
	}
	m.aux.mu.Lock()
	m.aux.closeDevice()
	m.aux.mu.Unlock()
	m.depth.mu.Lock()
	m.depth.closeDevice()
	m.depth.mu.Unlock()
	m.dev.on = false
	if err := m.dev.closeAPI(); err != nil && m.rl != nil {
		m.rl.Log(slog.LevelWarn, "device api close", "device-resident tensors: closing the device API", "err", oneLine(err))
	}
	return false
}

// DeviceResident reports whether the models run on device-resident
// tensors (inference.device_tensors) and in which memory ("Cuda", "Cpu";
// "" on the host path).
func (m *Models) DeviceResident() string {
	if m.deviceOn() {
		return m.dev.mem
	}
	return ""
}

// identity reports whether a read-out leaves every valid value as it is.
func (r Readout) identity() bool { return !r.Inverse && r.A == 1 && r.B == 0 }
