package record

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/didoedge/didoedge/internal/boundedfile"
)

// ModelIdentity returns the metadata that identifies the models and the
// calibration a recording was made with: for each name (e.g. "depth",
// "auxue", "calibration") "<name>_path" and "<name>_sha256" of the file.
// Record it under the "didoedge.models" metadata name (Options.Metadata).
func ModelIdentity(files map[string]string) (map[string]string, error) {
	out := map[string]string{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		path := files[n]
		if path == "" {
			continue
		}
		// Bounded: a model path is a config key (a regular file up to
		// the model cap; /dev/zero would be hashed for ever).
		f, err := boundedfile.Open("", path, boundedfile.Model)
		if err != nil {
			return nil, fmt.Errorf("model identity %s: %w", n, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, io.LimitReader(f, boundedfile.Model.Limit()))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("model identity %s: %s: %w", n, path, err)
		}
		out[n+"_path"] = path
		out[n+"_sha256"] = hex.EncodeToString(h.Sum(nil))
	}
	return out, nil
}

// CameraFile names the calibration file a camera's alerts are assessed
// with ("" when it runs on the built-in defaults).
type CameraFile struct {
	Camera, Calibration string
}

// Keys of the didoedge.models metadata that RunIdentity adds to
// ModelIdentity's: IdentityCameras lists the run's cameras (comma
// separated, in order); a camera's calibration is the ModelIdentity name
// CameraCalibrationName(camera).
const IdentityCameras = "cameras"

// CameraCalibrationName is the ModelIdentity name of a camera's
// calibration file: its keys are "camera.<camera>.calibration_path" and
// "camera.<camera>.calibration_sha256".
func CameraCalibrationName(camera string) string { return "camera." + camera + ".calibration" }

// RunIdentity is the didoedge.models metadata of a run: the depth model,
// the AuxUE, and each camera's own calibration file (CameraCalibrationName)
// with the list of cameras. With one camera it also holds the file-wide
// "calibration_path" and "calibration_sha256" that recordings made before
// per-camera calibrations held (their readers keep working); with several
// it does not, since no one file is the recording's calibration.
func RunIdentity(depth, auxue string, cams []CameraFile) (map[string]string, error) {
	files := map[string]string{"depth": depth, "auxue": auxue}
	names := make([]string, len(cams))
	for i, c := range cams {
		names[i] = c.Camera
		files[CameraCalibrationName(c.Camera)] = c.Calibration
	}
	out, err := ModelIdentity(files)
	if err != nil {
		return nil, err
	}
	if len(cams) == 1 && cams[0].Calibration != "" {
		name := CameraCalibrationName(cams[0].Camera)
		out["calibration_path"], out["calibration_sha256"] = out[name+"_path"], out[name+"_sha256"]
	}
	out[IdentityCameras] = strings.Join(names, ",")
	return out, nil
}

// CalibrationOf returns the path and sha256 of the calibration file a
// camera was assessed with, from didoedge.models metadata: the camera's
// own entry when the metadata lists cameras (RunIdentity; both empty for
// a listed camera on the built-in defaults), else the file-wide one of
// recordings made before per-camera calibrations.
func CalibrationOf(models map[string]string, camera string) (path, sha256 string) {
	name := "calibration"
	if _, perCamera := models[IdentityCameras]; perCamera {
		name = CameraCalibrationName(camera)
	}
	return models[name+"_path"], models[name+"_sha256"]
}
