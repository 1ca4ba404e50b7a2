package infer

import (
	"fmt"
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

// tensorRTOptions maps a ProviderConfig to ONNX Runtime's TensorRT keys.
func tensorRTOptions(p ProviderConfig, modelSHA256 string, inputShape []int64) (map[string]string, error) {
	o := map[string]string{
		"device_id":       strconv.Itoa(p.DeviceID),
		"trt_fp16_enable": boolFlag(p.FP16),
	}
	if p.WorkspaceBytes > 0 {
		o["trt_max_workspace_size"] = strconv.FormatInt(p.WorkspaceBytes, 10)
	}
	if p.EngineCacheDir != "" {
		dir := filepath.Join(p.EngineCacheDir, engineCacheKey(modelSHA256, p.FP16, inputShape))
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

func boolFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// appendProvider adds p to opts. TensorRT is followed by CUDA on the same
// device so that nodes TensorRT rejects still run on the GPU; CPU needs
// nothing (ONNX Runtime always has it).
func appendProvider(opts *ort.SessionOptions, p ProviderConfig, modelSHA256 string, inputShape []int64) error {
	switch p.Name {
	case ProviderCPU:
		return nil
	case ProviderTensorRT:
		trtOpts, err := tensorRTOptions(p, modelSHA256, inputShape)
		if err != nil {
			return err
		}
		t, err := ort.NewTensorRTProviderOptions()
		if err != nil {
			return fmt.Errorf("tensorrt options: %w", err)
		}
		defer t.Destroy()
		if err := t.Update(trtOpts); err != nil {
			return fmt.Errorf("tensorrt options: %w", err)
		}
		if err := opts.AppendExecutionProviderTensorRT(t); err != nil {
			return fmt.Errorf("tensorrt: %w", err)
		}
		return appendCUDA(opts, p.DeviceID)
	case ProviderCUDA:
		return appendCUDA(opts, p.DeviceID)
	}
	return fmt.Errorf("unknown execution provider %q", p.Name)
}

func appendCUDA(opts *ort.SessionOptions, device int) error {
	c, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return fmt.Errorf("cuda options: %w", err)
	}
	defer c.Destroy()
	if err := c.Update(map[string]string{"device_id": strconv.Itoa(device)}); err != nil {
		return fmt.Errorf("cuda options: %w", err)
	}
	if err := opts.AppendExecutionProviderCUDA(c); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	return nil
}
