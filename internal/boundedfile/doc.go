// Package boundedfile reads the files a configuration or a request names
// (config, IO spec, model description, calibration, intrinsics, token,
// password, certificates, models) without trusting them: only regular
// files are opened (a device such as /dev/zero, a FIFO, a socket or a
// directory is refused before a byte is read), each kind of file has a
// size cap checked on the open descriptor and again while reading, and
// errors name the config key and the path but never the file's content.
package boundedfile
