package onnxrt

import (
	"fmt"
)

// Config selects the runtime library and execution providers.
//
//	library: /opt/ort/libonnxruntime.so.1   # optional, see ResolveLibrary
//	intra_op_threads: 2                     # 0 = ONNX Runtime's default
//	thread_pool: global                     # or session; default global
//	thread_spinning: false                  # default false
//	providers:
//	  - {name: tensorrt, device_id: 0, fp16: true, engine_cache_dir: /var/cache/didoedge/trt, workspace_bytes: 1073741824}
//	  - {name: cuda, device_id: 0}
//	  - {name: cpu}
//
// A provider marked `required: true` is never fallen back from: a model it
// cannot run (its library or a GPU missing, or ONNX Runtime assigning it
// no node) fails the start with an error naming the key, and a run-time
// fault rebuilds the session on it again instead of on the next provider
// (faults.go). Providers listed after a required one could never be used
// and are refused.
type Config struct {
	Library string `yaml:"library"`
	// IntraOpThreads sizes the intra-op pool (the global one, or each
	// session's); 0 = ONNX Runtime's default, one thread per physical core.
	IntraOpThreads int `yaml:"intra_op_threads"`
	// ThreadPool is ThreadPoolGlobal (the default when empty): every session
	// of the process runs its parallel operators on one pool owned by the
	// ONNX Runtime environment; or ThreadPoolSession: each session creates
	// its own. With several sessions (depth and AuxUE, an ensemble, several
	// models) per-session pools multiply the threads competing for the cores.
	ThreadPool string `yaml:"thread_pool"`
	// ThreadSpinning lets idle pool threads busy-wait for the next parallel
	// section instead of sleeping. Off by default: spinning threads of
	// sessions that are not running take the cores from the one that is
	// (docs/runtime.md, Threads).
	ThreadSpinning bool             `yaml:"thread_spinning"`
	Providers      []ProviderConfig `yaml:"providers"`
	// DeviceTensors selects the device-resident path between the depth
	// model and the AuxUE (device.go): DeviceTensorsAuto (the default when
	// empty: on when both models run on CUDA), DeviceTensorsOn (also over
	// host memory when both run on the CPU) or DeviceTensorsOff.
	DeviceTensors string `yaml:"device_tensors"`
}

// Provider names.
const (
	ProviderTensorRT = "tensorrt"
	ProviderCUDA     = "cuda"
	ProviderCPU      = "cpu"
)

// ProviderConfig is one execution provider and its options.
type ProviderConfig struct {
	Name string `yaml:"name"` // tensorrt, cuda or cpu
	// DeviceID is the GPU index (tensorrt, cuda).
	DeviceID int `yaml:"device_id"`
	// FP16 lets TensorRT build half-precision engines (tensorrt only).
	FP16 bool `yaml:"fp16"`
	// EngineCacheDir keeps built TensorRT engines; each model gets a
	// sub-directory keyed by its sha256, the precision and the input shape.
	EngineCacheDir string `yaml:"engine_cache_dir"`
	// WorkspaceBytes caps TensorRT's builder workspace (0 = its default).
	WorkspaceBytes int64 `yaml:"workspace_bytes"`
	// Required: a model this provider cannot run fails the start instead
	// of falling back to the next provider (see Config).
	Required bool `yaml:"required"`
}

// gpu reports whether the provider runs on a GPU.
func (p ProviderConfig) GPU() bool { return p.Name == ProviderTensorRT || p.Name == ProviderCUDA }

// ortName is ONNX Runtime's name of the provider, as its node placement
// reports it.
func (p ProviderConfig) ORTName() string { return ORTProviderName(p.Name) }

func ORTProviderName(name string) string {
	switch name {
	case ProviderTensorRT:
		return "TensorrtExecutionProvider"
	case ProviderCUDA:
		return "CUDAExecutionProvider"
	case ProviderCPU:
		return "CPUExecutionProvider"
	}
	return name
}

// wantsGPU reports whether any configured provider runs on a GPU (the
// library resolution then prefers the project's GPU build).
func (c Config) WantsGPU() bool {
	for _, p := range c.Providers {
		if p.GPU() {
			return true
		}
	}
	return false
}

// Validate checks the provider list; an empty list means [cpu].
func (c Config) Validate() error {
	if c.IntraOpThreads < 0 {
		return fmt.Errorf("intra_op_threads: %d is negative", c.IntraOpThreads)
	}
	switch c.ThreadPool {
	case "", ThreadPoolGlobal, ThreadPoolSession:
	default:
		return fmt.Errorf("thread_pool: %q is not one of %s, %s", c.ThreadPool, ThreadPoolGlobal, ThreadPoolSession)
	}
	switch c.DeviceTensors {
	case "", DeviceTensorsAuto, DeviceTensorsOn, DeviceTensorsOff:
	default:
		return fmt.Errorf("device_tensors: %q is not one of %s, %s, %s", c.DeviceTensors, DeviceTensorsAuto, DeviceTensorsOn, DeviceTensorsOff)
	}
	seen := map[string]bool{}
	required := -1
	for i, p := range c.Providers {
		if required >= 0 {
			return fmt.Errorf("providers[%d]: %s is listed after providers[%d] (%s), which is required: it would never be used; remove it or providers[%d].required",
				i, p.Name, required, c.Providers[required].Name, required)
		}
		if p.Required {
			required = i
		}
		switch p.Name {
		case ProviderTensorRT, ProviderCUDA, ProviderCPU:
		default:
			return fmt.Errorf("providers[%d].name: %q is not one of tensorrt, cuda, cpu", i, p.Name)
		}
		if seen[p.Name] {
			return fmt.Errorf("providers[%d].name: %q listed twice", i, p.Name)
		}
		seen[p.Name] = true
		if p.DeviceID < 0 {
			return fmt.Errorf("providers[%d].device_id: %d is negative", i, p.DeviceID)
		}
		if p.WorkspaceBytes < 0 {
			return fmt.Errorf("providers[%d].workspace_bytes: %d is negative", i, p.WorkspaceBytes)
		}
		if p.Name != ProviderTensorRT && (p.FP16 || p.EngineCacheDir != "" || p.WorkspaceBytes != 0) {
			return fmt.Errorf("providers[%d]: fp16, engine_cache_dir and workspace_bytes apply to tensorrt only, not %s", i, p.Name)
		}
	}
	return nil
}

// globalPool returns the settings of the process-wide pool the sessions
// share, or nil when each session has its own.
func (c Config) GlobalPool() *poolSettings {
	if c.ThreadPool == ThreadPoolSession {
		return nil
	}
	return &poolSettings{intraOp: c.IntraOpThreads, spinning: c.ThreadSpinning}
}

func (c Config) EffectiveProviders() []ProviderConfig {
	if len(c.Providers) == 0 {
		return []ProviderConfig{{Name: ProviderCPU}}
	}
	return c.Providers
}

// Values of Config.DeviceTensors (inference.device_tensors).
const (
	// DeviceTensorsAuto (the default): device-resident tensors when the
	// depth model and the AuxUE both run on CUDA; the host path otherwise.
	DeviceTensorsAuto = "auto"
	// DeviceTensorsOn: device-resident tensors on CUDA, and the same code
	// path over host memory ("Cpu" memory info) when both models run on
	// the CPU (the path the CPU tests run; on a CPU it saves nothing).
	DeviceTensorsOn = "on"
	// DeviceTensorsOff: the host path (every input and output a host
	// tensor, copied by ONNX Runtime on every run).
	DeviceTensorsOff = "off"
)
