//go:build ignore

// protodump writes the .proto source of a protobuf file descriptor embedded in
// protoc-generated Java (the descriptorData string array of a *Protos.java
// file), so that the schemas a Hadoop release was built with can be vendored
// from its published sources jar. Only what Hadoop's proto2 files of the data
// path and the RPC use (services included) is printed; anything else is an
// error rather than a silent omission.
//
// Usage: go run protodump.go DataTransferProtos.java > datatransfer.proto
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run protodump.go FILE.java")
		os.Exit(2)
	}
	src, err := os.ReadFile(os.Args[1])
	check(err)
	raw, err := descriptorBytes(string(src))
	check(err)
	if out := os.Getenv("PROTODUMP_RAW"); out != "" {
		check(os.WriteFile(out, raw, 0o644))
	}
	var fd descriptorpb.FileDescriptorProto
	check(proto.Unmarshal(raw, &fd))
	var b strings.Builder
	check(printFile(&b, &fd))
	fmt.Print(b.String())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "protodump:", err)
		os.Exit(1)
	}
}

// descriptorBytes concatenates the Java string literals of descriptorData and
// decodes their escapes; each char of the strings is one byte (ISO-8859-1).
func descriptorBytes(java string) ([]byte, error) {
	i := strings.Index(java, "descriptorData = {")
	if i < 0 {
		return nil, fmt.Errorf("no descriptorData")
	}
	rest := java[i:]
	end := strings.Index(rest, "};")
	rest = rest[:end]
	var out []byte
	for {
		q := strings.IndexByte(rest, '"')
		if q < 0 {
			break
		}
		rest = rest[q+1:]
		j := 0
		for ; rest[j] != '"'; j++ {
			if rest[j] == '\\' {
				j++
			}
		}
		lit := rest[:j]
		rest = rest[j+1:]
		for k := 0; k < len(lit); k++ {
			c := lit[k]
			if c != '\\' {
				out = append(out, c)
				continue
			}
			k++
			switch e := lit[k]; {
			case e >= '0' && e <= '7':
				n := 0
				m := 0
				for ; m < 3 && k < len(lit) && lit[k] >= '0' && lit[k] <= '7'; m++ {
					n = n*8 + int(lit[k]-'0')
					k++
				}
				k--
				out = append(out, byte(n))
			case e == 'n':
				out = append(out, '\n')
			case e == 'r':
				out = append(out, '\r')
			case e == 't':
				out = append(out, '\t')
			case e == 'b':
				out = append(out, '\b')
			case e == 'f':
				out = append(out, '\f')
			case e == '"', e == '\'', e == '\\':
				out = append(out, e)
			case e == 'u':
				v, err := strconv.ParseUint(lit[k+1:k+5], 16, 16)
				if err != nil || v > 0xff {
					return nil, fmt.Errorf("escape \\u%s", lit[k+1:k+5])
				}
				out = append(out, byte(v))
				k += 4
			default:
				return nil, fmt.Errorf("unknown escape \\%c", e)
			}
		}
	}
	return out, nil
}

func printFile(b *strings.Builder, fd *descriptorpb.FileDescriptorProto) error {
	if fd.Syntax != nil && fd.GetSyntax() != "proto2" {
		return fmt.Errorf("syntax %q", fd.GetSyntax())
	}
	if len(fd.Extension) > 0 || len(fd.PublicDependency) > 0 {
		return fmt.Errorf("%s: extensions and public imports are not printed", fd.GetName())
	}
	fmt.Fprintf(b, "// %s of Apache Hadoop 3.4.1, printed from the descriptor in the\n// release's generated Java by protodump.go (see README.md).\n\n", fd.GetName())
	b.WriteString("syntax = \"proto2\";\n\n")
	if o := fd.Options; o != nil {
		known := &descriptorpb.FileOptions{JavaPackage: o.JavaPackage, JavaOuterClassname: o.JavaOuterClassname, JavaGenerateEqualsAndHash: o.JavaGenerateEqualsAndHash, JavaGenericServices: o.JavaGenericServices}
		if !proto.Equal(known, o) {
			return fmt.Errorf("%s: unprinted file options %v", fd.GetName(), o)
		}
		if o.JavaPackage != nil {
			fmt.Fprintf(b, "option java_package = %q;\n", o.GetJavaPackage())
		}
		if o.JavaOuterClassname != nil {
			fmt.Fprintf(b, "option java_outer_classname = %q;\n", o.GetJavaOuterClassname())
		}
		if o.JavaGenerateEqualsAndHash != nil {
			fmt.Fprintf(b, "option java_generate_equals_and_hash = %v;\n", o.GetJavaGenerateEqualsAndHash())
		}
		if o.JavaGenericServices != nil {
			fmt.Fprintf(b, "option java_generic_services = %v;\n", o.GetJavaGenericServices())
		}
	}
	fmt.Fprintf(b, "package %s;\n\n", fd.GetPackage())
	for _, d := range fd.Dependency {
		fmt.Fprintf(b, "import %q;\n", d)
	}
	for _, e := range fd.EnumType {
		b.WriteString("\n")
		if err := printEnum(b, e, ""); err != nil {
			return err
		}
	}
	for _, m := range fd.MessageType {
		b.WriteString("\n")
		if err := printMessage(b, m, ""); err != nil {
			return err
		}
	}
	for _, sv := range fd.Service {
		b.WriteString("\n")
		if err := printService(b, sv); err != nil {
			return err
		}
	}
	return nil
}

func printService(b *strings.Builder, s *descriptorpb.ServiceDescriptorProto) error {
	if s.Options != nil {
		return fmt.Errorf("service %s: options are not printed", s.GetName())
	}
	fmt.Fprintf(b, "service %s {\n", s.GetName())
	for _, m := range s.Method {
		if m.Options != nil || m.GetClientStreaming() || m.GetServerStreaming() {
			return fmt.Errorf("method %s.%s: options or streaming are not printed", s.GetName(), m.GetName())
		}
		fmt.Fprintf(b, "  rpc %s(%s) returns(%s);\n", m.GetName(), m.GetInputType(), m.GetOutputType())
	}
	b.WriteString("}\n")
	return nil
}

func printEnum(b *strings.Builder, e *descriptorpb.EnumDescriptorProto, ind string) error {
	if e.Options != nil || len(e.ReservedRange) > 0 || len(e.ReservedName) > 0 {
		return fmt.Errorf("enum %s: options or reserved are not printed", e.GetName())
	}
	fmt.Fprintf(b, "%senum %s {\n", ind, e.GetName())
	for _, v := range e.Value {
		if v.Options != nil {
			return fmt.Errorf("enum value %s: options are not printed", v.GetName())
		}
		fmt.Fprintf(b, "%s  %s = %d;\n", ind, v.GetName(), v.GetNumber())
	}
	fmt.Fprintf(b, "%s}\n", ind)
	return nil
}

func printMessage(b *strings.Builder, m *descriptorpb.DescriptorProto, ind string) error {
	if m.Options != nil || len(m.OneofDecl) > 0 || len(m.Extension) > 0 || len(m.ReservedName) > 0 || len(m.ReservedRange) > 0 {
		return fmt.Errorf("message %s: options, oneofs, extensions or reserved are not printed", m.GetName())
	}
	fmt.Fprintf(b, "%smessage %s {\n", ind, m.GetName())
	in := ind + "  "
	for _, e := range m.EnumType {
		if err := printEnum(b, e, in); err != nil {
			return err
		}
	}
	maps := map[string]*descriptorpb.DescriptorProto{}
	for _, n := range m.NestedType {
		if n.GetOptions().GetMapEntry() {
			maps[n.GetName()] = n
			continue
		}
		if err := printMessage(b, n, in); err != nil {
			return err
		}
	}
	for _, r := range m.ExtensionRange {
		fmt.Fprintf(b, "%sextensions %d to %d;\n", in, r.GetStart(), r.GetEnd()-1)
	}
	for _, f := range m.Field {
		label := strings.ToLower(strings.TrimPrefix(f.GetLabel().String(), "LABEL_"))
		typ := f.GetTypeName()
		if typ == "" {
			typ = scalar(f)
		}
		if i := strings.LastIndexByte(typ, '.'); i >= 0 && maps[typ[i+1:]] != nil && f.GetLabel() == descriptorpb.FieldDescriptorProto_LABEL_REPEATED {
			e := maps[typ[i+1:]]
			k, v := e.Field[0], e.Field[1]
			vt := v.GetTypeName()
			if vt == "" {
				vt = scalar(v)
			}
			label, typ = "", "map<"+scalar(k)+", "+vt+">"
		}
		var opts []string
		if f.DefaultValue != nil {
			v := f.GetDefaultValue()
			switch f.GetType() {
			case descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_BYTES:
				v = strconv.Quote(v)
			}
			opts = append(opts, "default = "+v)
		}
		if o := f.Options; o != nil {
			if !proto.Equal(o, &descriptorpb.FieldOptions{Packed: o.Packed, Deprecated: o.Deprecated}) {
				return fmt.Errorf("field %s.%s: unprinted options %v", m.GetName(), f.GetName(), o)
			}
			if o.Packed != nil {
				opts = append(opts, fmt.Sprintf("packed = %v", o.GetPacked()))
			}
			if o.Deprecated != nil {
				opts = append(opts, fmt.Sprintf("deprecated = %v", o.GetDeprecated()))
			}
		}
		o := ""
		if len(opts) > 0 {
			o = " [" + strings.Join(opts, ", ") + "]"
		}
		if label != "" {
			label += " "
		}
		fmt.Fprintf(b, "%s%s%s %s = %d%s;\n", in, label, typ, f.GetName(), f.GetNumber(), o)
	}
	fmt.Fprintf(b, "%s}\n", ind)
	return nil
}

func scalar(f *descriptorpb.FieldDescriptorProto) string {
	return strings.ToLower(strings.TrimPrefix(f.GetType().String(), "TYPE_"))
}
