// luahealth runs Argo CD resource health scripts the way Argo CD v3.6.2 runs a health
// check configured in argocd-cm, so valtune's scripts are tested against the Lua Argo
// actually gives them (gopher-lua v1.1.2, Lua 5.1). `make test-gitops` checks that
// Argo CD itself (`argocd admin settings resource-overrides health`) judges every
// fixture as this harness does.
//
// What is copied from argo-cd v3.6.2 util/lua/lua.go (Apache-2.0):
//   - runLuaWithResourceActionParameters: lua.NewState(SkipOpenLibs: !useOpenLibs), then
//     package, base, table and the "safe" os (time and date only; oslib_safe.go), a 1 s
//     timeout, the resource as the global `obj`;
//   - decodeValue: how the resource becomes Lua values (null is nil, numbers are numbers);
//   - ExecuteHealthLua: the returned table is JSON-encoded with layeh.com/gopher-json and
//     read as {status, message}; a status outside Healthy, Progressing, Degraded,
//     Suspended, Missing, Unknown becomes Unknown "Lua returned an invalid health status".
//
// and from gitops-engine v3.6.2 pkg/health/health.go, GetResourceHealth's handling of a
// resource being deleted (new in 3.6): with metadata.deletionTimestamp set (and no hook
// finalizer), a script's `deletionMessage` replaces its message, keeping its status; a
// script that sets none gives Progressing "Pending deletion", with "; blocked by
// finalizers: a, b" when there are finalizers.
//
// Without -open-libs (argocd-cm's default, resource.customizations.useOpenLibs unset)
// there is no string or math library, as in Argo CD.
//
// Usage:
//
//	luahealth [-open-libs] test DIR...        # DIR: health.lua, health_test.yaml, testdata/
//	luahealth [-open-libs] run SCRIPT OBJECT  # prints "status<TAB>message"
//
// health_test.yaml has Argo CD's own format (resource_customizations/*/*/health_test.yaml):
//
//	tests:
//	- healthStatus: {status: Progressing, message: "..."}
//	  inputPath: testdata/running.yaml
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
	"sigs.k8s.io/yaml"
)

type healthStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	// What a script says of a resource being deleted (gitops-engine v3.6.2
	// pkg/health/health.go HealthStatus.DeletionMessage); never in a final result.
	DeletionMessage string `json:"deletionMessage,omitempty"`
}

type testCase struct {
	InputPath    string       `json:"inputPath"`
	HealthStatus healthStatus `json:"healthStatus"`
}

type testFile struct {
	Tests []testCase `json:"tests"`
}

// decodeValue: argo-cd v3.6.2 util/lua/lua.go decodeValue.
func decodeValue(l *lua.LState, value any) lua.LValue {
	switch converted := value.(type) {
	case bool:
		return lua.LBool(converted)
	case float64:
		return lua.LNumber(converted)
	case string:
		return lua.LString(converted)
	case json.Number:
		return lua.LString(converted)
	case int:
		return lua.LNumber(converted)
	case int32:
		return lua.LNumber(converted)
	case int64:
		return lua.LNumber(converted)
	case []any:
		arr := l.CreateTable(len(converted), 0)
		for _, item := range converted {
			arr.Append(decodeValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(converted))
		for key, item := range converted {
			tbl.RawSetH(lua.LString(key), decodeValue(l, item))
		}
		return tbl
	case nil:
		return lua.LNil
	}
	return lua.LNil
}

// The safe os of argo-cd v3.6.2 util/lua/oslib_safe.go: time and date only (date without
// Argo's strftime formats: valtune's scripts use neither). Argo's OpenSafeOs registers
// them under the table library's name (and `require("os")` loads them); kept as there.
var osFuncs = map[string]lua.LGFunction{
	"time": func(l *lua.LState) int { l.Push(lua.LNumber(time.Now().Unix())); return 1 },
	"date": func(l *lua.LState) int { l.Push(lua.LString(time.Now().Format(time.ANSIC))); return 1 },
}

func openSafeOs(l *lua.LState) int {
	l.Push(l.RegisterModule(lua.TabLibName, osFuncs))
	return 1
}

func safeOsLoader(l *lua.LState) int {
	l.Push(l.SetFuncs(l.NewTable(), osFuncs))
	return 1
}

var validStatus = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true,
}

// scriptHealth: argo-cd v3.6.2 runLuaWithResourceActionParameters + ExecuteHealthLua.
func scriptHealth(script string, obj map[string]any, openLibs bool) (*healthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer l.Close()
	for _, pair := range []struct {
		n string
		f lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.OsLibName, openSafeOs},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(pair.f), NRet: 0, Protect: true}, lua.LString(pair.n)); err != nil {
			return nil, err
		}
	}
	l.PreloadModule(lua.OsLibName, safeOsLoader)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decodeValue(l, obj))
	if err := l.DoString(script); err != nil {
		var apiErr *lua.ApiError
		if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
			apiErr.StackTrace = ""
			return nil, apiErr
		}
		return nil, err
	}
	ret := l.Get(-1)
	switch ret.Type() {
	case lua.LTNil:
		return nil, nil
	case lua.LTTable:
	default:
		return nil, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
	data, err := luajson.Encode(ret)
	if err != nil {
		return nil, err
	}
	hs := &healthStatus{}
	if err := json.Unmarshal(data, hs); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Value == "array" {
			return &healthStatus{}, nil // an empty table encodes as []
		}
		return nil, err
	}
	if !validStatus[hs.Status] {
		return &healthStatus{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
	}
	return hs, nil
}

// hookFinalizer: gitops-engine v3.6.2 pkg/sync/hook (HasHookFinalizer).
const hookFinalizer = "argocd.argoproj.io/hook-finalizer"

// health: gitops-engine v3.6.2 pkg/health/health.go GetResourceHealth for a kind with a
// configured script and no built-in check, pendingDeletionHealth included.
func health(script string, obj map[string]any, openLibs bool) (*healthStatus, error) {
	hs, err := scriptHealth(script, obj, openLibs)
	if err != nil {
		return nil, err
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil || meta["deletionTimestamp"] == nil {
		if hs != nil {
			hs.DeletionMessage = ""
		}
		return hs, nil
	}
	var finalizers []string
	if list, ok := meta["finalizers"].([]any); ok {
		for _, f := range list {
			if s, ok := f.(string); ok {
				finalizers = append(finalizers, s)
			}
		}
	}
	for _, f := range finalizers {
		if f == hookFinalizer && hs != nil {
			hs.DeletionMessage = ""
			return hs, nil
		} else if f == hookFinalizer {
			return nil, nil
		}
	}
	if hs != nil && hs.DeletionMessage != "" {
		return &healthStatus{Status: hs.Status, Message: hs.DeletionMessage}, nil
	}
	msg := "Pending deletion"
	if len(finalizers) > 0 {
		msg = "Pending deletion; blocked by finalizers: " + strings.Join(finalizers, ", ")
	}
	return &healthStatus{Status: "Progressing", Message: msg}, nil
}

func readObject(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return obj, nil
}

func show(hs *healthStatus) string {
	if hs == nil {
		return "(no health)"
	}
	return fmt.Sprintf("%s %q", hs.Status, hs.Message)
}

// testDir runs every case of DIR/health_test.yaml; the number of failures.
func testDir(dir string, openLibs bool) (int, error) {
	script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
	if err != nil {
		return 0, err
	}
	var tf testFile
	if err := yaml.UnmarshalStrict(data, &tf); err != nil {
		return 0, fmt.Errorf("%s/health_test.yaml: %w", dir, err)
	}
	if len(tf.Tests) == 0 {
		return 0, fmt.Errorf("%s/health_test.yaml has no tests", dir)
	}
	failed := 0
	for _, tc := range tf.Tests {
		obj, err := readObject(filepath.Join(dir, tc.InputPath))
		if err != nil {
			return failed, err
		}
		got, err := health(string(script), obj, openLibs)
		want := tc.HealthStatus
		switch {
		case err != nil:
			failed++
			fmt.Printf("FAIL %s/%s: the script failed: %v\n", dir, tc.InputPath, err)
		case got == nil || *got != want:
			failed++
			fmt.Printf("FAIL %s/%s: got %s, expected %s\n", dir, tc.InputPath, show(got), show(&want))
		default:
			fmt.Printf("ok   %s/%s: %s\n", dir, tc.InputPath, show(got))
		}
	}
	return failed, nil
}

func main() {
	openLibs := flag.Bool("open-libs", false, "open every Lua library (argocd-cm resource.customizations.useOpenLibs)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: luahealth [-open-libs] test DIR... | run SCRIPT OBJECT")
	}
	flag.Parse()
	args := flag.Args()
	if len(args) < 2 {
		flag.Usage()
		os.Exit(2)
	}
	switch args[0] {
	case "test":
		failed := 0
		for _, dir := range args[1:] {
			n, err := testDir(dir, *openLibs)
			if err != nil {
				fmt.Fprintln(os.Stderr, "luahealth:", err)
				os.Exit(2)
			}
			failed += n
		}
		if failed > 0 {
			fmt.Printf("%d health check case(s) failed\n", failed)
			os.Exit(1)
		}
	case "run":
		if len(args) != 3 {
			flag.Usage()
			os.Exit(2)
		}
		script, err := os.ReadFile(args[1])
		if err == nil {
			var obj map[string]any
			if obj, err = readObject(args[2]); err == nil {
				var hs *healthStatus
				if hs, err = health(string(script), obj, *openLibs); err == nil {
					if hs == nil {
						hs = &healthStatus{}
					}
					fmt.Printf("%s\t%s\n", hs.Status, strings.ReplaceAll(hs.Message, "\n", " "))
					return
				}
			}
		}
		fmt.Fprintln(os.Stderr, "luahealth:", err)
		os.Exit(1)
	default:
		flag.Usage()
		os.Exit(2)
	}
}
