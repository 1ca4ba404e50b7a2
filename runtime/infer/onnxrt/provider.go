package onnxrt

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// engineCacheKey names the TensorRT engine cache sub-directory of a model: an
// engine is only valid for the same weights, precision and input shape.
func engineCacheKey(modelSHA256 string, fp16 bool, inputShape []int64) string {
	prec := "fp32"
	if fp16 {
		prec = "fp16"
	}
	dims := make([]string, len(inputShape))
	for i, d := range inputShape {
		dims[i] = strconv.FormatInt(d, 10)
	}
	sha := modelSHA256
	if len(sha) > 16 {
		sha = sha[:16]
	}
	return fmt.Sprintf("%s_%s_%s", sha, prec, strings.Join(dims, "x"))
}

// BatchProfile is the range of batch sizes a dynamic-batch session runs:
// each input's shape for one frame, and the largest batch. TensorRT builds
// one engine per optimization profile; without an explicit profile it
// builds for the first shape it sees and rebuilds (seconds to minutes on
// a Jetson, the pipeline stalled) the first time a partial batch of
// another size arrives.
type BatchProfile struct {
	Inputs []string
	Frame  [][]int64 // per input, batch dimension first (1 here)
	Max    int
}

// options are ONNX Runtime's TensorRT profile keys: min batch 1, opt and
// max the configured batch size ("name:1x3x192x640,depth:1x1x192x640").
func (b BatchProfile) Options() map[string]string {
	shapes := func(n int) string {
		parts := make([]string, len(b.Inputs))
		for i, name := range b.Inputs {
			dims := make([]string, len(b.Frame[i]))
			for k, d := range b.Frame[i] {
				if k == 0 {
					d = int64(n)
				}
				dims[k] = strconv.FormatInt(d, 10)
			}
			parts[i] = name + ":" + strings.Join(dims, "x")
		}
		return strings.Join(parts, ",")
	}
	return map[string]string{
		"trt_profile_min_shapes": shapes(1),
		"trt_profile_opt_shapes": shapes(b.Max),
		"trt_profile_max_shapes": shapes(b.Max),
	}
}

// TensorRTOptions maps a ProviderConfig to ONNX Runtime's TensorRT keys.
// profile is nil for a session that runs one fixed shape.
func TensorRTOptions(p ProviderConfig, modelSHA256 string, inputShape []int64, profile *BatchProfile) (map[string]string, error) {
	o := map[string]string{
		"device_id":       strconv.Itoa(p.DeviceID),
		"trt_fp16_enable": BoolFlag(p.FP16),
	}
	if p.WorkspaceBytes > 0 {
		o["trt_max_workspace_size"] = strconv.FormatInt(p.WorkspaceBytes, 10)
	}
	key := engineCacheKey(modelSHA256, p.FP16, inputShape)
	if profile != nil {
		maps.Copy(o, profile.Options())
		key += "_b1-" + strconv.Itoa(profile.Max)
	}
	if p.EngineCacheDir != "" {
		dir := filepath.Join(p.EngineCacheDir, key)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("engine_cache_dir: %w", err)
		}
		o["trt_engine_cache_enable"] = "1"
		o["trt_engine_cache_path"] = dir
		o["trt_timing_cache_enable"] = "1"
		o["trt_timing_cache_path"] = dir
	}
	return o, nil
}

func BoolFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// AppendProvider adds p to opts, for the library at libPath. TensorRT is
// followed by CUDA on the same device so that nodes TensorRT rejects still
// run on the GPU; CPU needs nothing (ONNX Runtime always has it).
//
// CUDA goes through the V1 C call (SessionOptionsAppendExecutionProvider_CUDA):
// Microsoft's 1.29.0 GPU build answers the V2 CreateCUDAProviderOptions
// with "CUDA execution provider is not enabled in this build" but loads
// libonnxruntime_providers_cuda.so from beside the core through V1.
// TensorRT tries the V2 options first (they carry the batch profile), then
// V1 (engine cache, fp16, workspace; no profile).
func AppendProvider(opts *ort.SessionOptions, libPath string, p ProviderConfig, modelSHA256 string, inputShape []int64, profile *BatchProfile) error {
	switch p.Name {
	case ProviderCPU:
		return nil
	case ProviderTensorRT:
		trtOpts, err := TensorRTOptions(p, modelSHA256, inputShape, profile)
		if err != nil {
			return err
		}
		if errV2 := appendTensorRTV2(opts, trtOpts); errV2 != nil {
			if err := appendTensorRTV1(libPath, opts, tensorRTV1(p, trtOpts)); err != nil {
				return fmt.Errorf("tensorrt: %w (V2 options: %v)", withBuildHint(err, libPath, ProviderTensorRT), errV2)
			}
		}
		return appendCUDA(opts, libPath, p.DeviceID)
	case ProviderCUDA:
		return appendCUDA(opts, libPath, p.DeviceID)
	}
	return fmt.Errorf("unknown execution provider %q", p.Name)
}

// appendTensorRTV2 appends TensorRT through the binding's V2 options.
func appendTensorRTV2(opts *ort.SessionOptions, trtOpts map[string]string) error {
	t, err := ort.NewTensorRTProviderOptions()
	if err != nil {
		return err
	}
	defer t.Destroy()
	if err := t.Update(trtOpts); err != nil {
		return err
	}
	return opts.AppendExecutionProviderTensorRT(t)
}

// tensorRTV1 maps the V2 keys to the V1 struct's fields (the profile keys
// have no V1 field and are dropped).
func tensorRTV1(p ProviderConfig, trtOpts map[string]string) trtV1 {
	o := trtV1{device: p.DeviceID, fp16: p.FP16, workspace: p.WorkspaceBytes, cacheDir: trtOpts["trt_engine_cache_path"],
		minSubgraph: 1, maxPartitions: 1000}
	if o.workspace == 0 {
		o.workspace = 1 << 30 // ONNX Runtime's default (1 GiB)
	}
	return o
}

func appendCUDA(opts *ort.SessionOptions, libPath string, device int) error {
	if err := appendCUDAV1(libPath, opts, device, 0); err != nil {
		return fmt.Errorf("cuda: %w", withBuildHint(err, libPath, ProviderCUDA))
	}
	return nil
}

// ProviderLibrary is the file name of a provider's library beside the
// ONNX Runtime core.
func ProviderLibrary(name string) string {
	return "libonnxruntime_providers_" + name + ".so"
}

// withBuildHint adds what to do when the provider's library is not beside
// the core (a CPU build of ONNX Runtime), or when it is there but a
// library it needs is missing (CUDA 13, cuDNN, TensorRT).
func withBuildHint(err error, libPath, provider string) error {
	if !strings.ContainsRune(libPath, os.PathSeparator) {
		return err
	}
	dir := filepath.Dir(libPath)
	if _, statErr := os.Stat(filepath.Join(dir, ProviderLibrary(provider))); statErr != nil {
		return fmt.Errorf("%w (no %s beside %s: a CPU build of ONNX Runtime; fetch the GPU build with `bash scripts/deps.sh --gpu` or point the config key library at one, docs/deploy.md)",
			err, ProviderLibrary(provider), libPath)
	}
	if dlErr := dlCheck(filepath.Join(dir, ProviderLibrary(provider))); dlErr != nil {
		return fmt.Errorf("%w: %v (%s is there, but a library it needs is not on the loader path: CUDA 13 for the x64 GPU build (libcublas, libcublasLt, libcudart, libcurand), cuDNN 9 and TensorRT 10 for tensorrt; set LD_LIBRARY_PATH, docs/deploy.md)",
			err, dlErr, ProviderLibrary(provider))
	}
	return err
}
