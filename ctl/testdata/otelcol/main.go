// Command otelcol is an OpenTelemetry Collector of the few components
// heapline's tests need: the OTLP receiver, the file exporter and the
// bearer-token authenticator. It is built from the Collector's own
// modules, in a module of its own (this directory's go.mod), so that the
// project's go.mod holds none of them; the tests build it once per
// go.mod, go.sum and main.go and cache the binary (otelcolBinary).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry"
	"go.uber.org/zap"
)

func factories() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap(otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap(fileexporter.NewFactory()); err != nil {
		return f, err
	}
	if f.Extensions, err = otelcol.MakeFactoryMap(bearertokenauthextension.NewFactory()); err != nil {
		return f, err
	}
	f.Telemetry = minimalTelemetry()
	return f, nil
}

// minimalTelemetry logs on stderr, where the tests read it, and has no
// metrics or traces of its own (the factory's no-op providers).
func minimalTelemetry() telemetry.Factory {
	return telemetry.NewFactory(
		func() component.Config { return &struct{}{} },
		telemetry.WithCreateLogger(func(context.Context, telemetry.LoggerSettings, component.Config) (*zap.Logger, component.ShutdownFunc, error) {
			cfg := zap.NewProductionConfig()
			cfg.Encoding = "console"
			cfg.Sampling = nil
			l, err := cfg.Build()
			return l, nil, err
		}),
	)
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "heapline's test Collector", Version: "0.165.0"},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
