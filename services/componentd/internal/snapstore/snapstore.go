// Package snapstore keeps componentd's etcd snapshots: in the management plane's own
// replicated JetStream object store (the default), or in an S3-compatible store a platform
// team points componentd at (AWS S3, MinIO, SeaweedFS, Ceph RGW, ...).
package snapstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/nats-io/nats.go/jetstream"
)

// Store keeps snapshots by object name ("<cluster>/<backup>").
type Store interface {
	// Put stores size bytes from r under name, replacing what was there.
	Put(ctx context.Context, name, description string, r io.Reader, size int64) error
	// GetFile writes the object name into the file path.
	GetFile(ctx context.Context, name, path string) error
	// Delete removes the object name; one that is not there is no error.
	Delete(ctx context.Context, name string) error
	// String says where the snapshots are, for status messages and logs.
	String() string
}

// ErrBadURL is returned for an S3 URL Open cannot use.
var ErrBadURL = errors.New("backup store URL")

// NATS is a Store on a JetStream object store.
func NATS(objects jetstream.ObjectStore, bucket string) Store {
	return natsStore{objects: objects, bucket: bucket}
}

type natsStore struct {
	objects jetstream.ObjectStore
	bucket  string
}

func (s natsStore) Put(ctx context.Context, name, description string, r io.Reader, _ int64) error {
	_, err := s.objects.Put(ctx, jetstream.ObjectMeta{Name: name, Description: description}, r)
	return err
}

func (s natsStore) GetFile(ctx context.Context, name, path string) error {
	return s.objects.GetFile(ctx, name, path)
}

func (s natsStore) Delete(ctx context.Context, name string) error {
	if err := s.objects.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	return nil
}

func (s natsStore) String() string { return "object store " + s.bucket }

// S3Config says which S3-compatible store to use.
type S3Config struct {
	// URL is the store's endpoint, bucket and optional key prefix:
	// https://s3.example.com/<bucket>[/<prefix>] (http:// for a store without TLS).
	URL string
	// CAFile, if set, is the CA bundle that verifies the endpoint's certificate (else the
	// system's roots).
	CAFile string
	// Region, if set, is the bucket's region (else the store is asked).
	Region string
	// Credentials, if nil, come from the environment the AWS tools read
	// (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then ~/.aws/credentials and the
	// AWS_PROFILE, then MinIO's MINIO_ACCESS_KEY and MINIO_SECRET_KEY, then IAM).
	Credentials *credentials.Credentials
}

// S3 opens the S3-compatible store cfg names, and creates the bucket if it is not there.
func S3(ctx context.Context, cfg S3Config) (Store, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrBadURL, cfg.URL, err)
	}
	bucket, prefix, _ := strings.Cut(strings.Trim(u.Path, "/"), "/")
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || bucket == "" {
		return nil, fmt.Errorf("%w %q: want https://<host>/<bucket>[/<prefix>] (or http://)", ErrBadURL, cfg.URL)
	}
	creds := cfg.Credentials
	if creds == nil {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}, &credentials.EnvMinio{}, &credentials.IAM{},
		})
	}
	opts := &minio.Options{Creds: creds, Secure: u.Scheme == "https", Region: cfg.Region}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("backup store CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("backup store CA %s: no certificate in it", cfg.CAFile)
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		opts.Transport = t
	}
	c, err := minio.New(u.Host, opts)
	if err != nil {
		return nil, fmt.Errorf("backup store %s: %w", cfg.URL, err)
	}
	s := &s3Store{c: c, bucket: bucket, prefix: prefix, where: u.Scheme + "://" + u.Host + "/" + strings.Trim(u.Path, "/")}
	ok, err := c.BucketExists(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("backup store %s: bucket %s: %w", s.where, bucket, err)
	}
	if !ok {
		if err := c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: cfg.Region}); err != nil {
			return nil, fmt.Errorf("backup store %s: create bucket %s: %w", s.where, bucket, err)
		}
	}
	return s, nil
}

type s3Store struct {
	c              *minio.Client
	bucket, prefix string
	where          string
}

func (s *s3Store) key(name string) string { return path.Join(s.prefix, name) }

func (s *s3Store) Put(ctx context.Context, name, description string, r io.Reader, size int64) error {
	_, err := s.c.PutObject(ctx, s.bucket, s.key(name), r, size, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{"description": description},
	})
	return err
}

func (s *s3Store) GetFile(ctx context.Context, name, path string) error {
	return s.c.FGetObject(ctx, s.bucket, s.key(name), path, minio.GetObjectOptions{})
}

func (s *s3Store) Delete(ctx context.Context, name string) error {
	err := s.c.RemoveObject(ctx, s.bucket, s.key(name), minio.RemoveObjectOptions{})
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return nil
	}
	return err
}

func (s *s3Store) String() string { return s.where }
