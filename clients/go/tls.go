package sekka

import (
	"crypto/tls"
	"crypto/x509"
	"os"
)

// TLSFiles makes the Options.TLS of a client from PEM files: caFile is the CA that signed the
// servers' certificates ("system": the system's CAs), certFile and keyFile a client
// certificate for servers that require one ("" and "" = none). TLS 1.2 or later. Errors wrap
// ErrInvalidArgument and name the file that cannot be used.
func TLSFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if (certFile == "") != (keyFile == "") {
		return nil, errorf(ErrInvalidArgument, "the client certificate and its key go together: give both or neither")
	}
	if caFile != "system" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, errorf(ErrInvalidArgument, "CA file %q cannot be read: %v", caFile, err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errorf(ErrInvalidArgument, "CA file %q holds no PEM certificate", caFile)
		}
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, errorf(ErrInvalidArgument, "client certificate %q with key %q cannot be used: %v", certFile, keyFile, err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}
