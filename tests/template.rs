//! Chat templates read from files, rendered by minijinja: real GLM-4.6 and
//! DeepSeek-R1 templates (llama.cpp's `models/templates`, kept as data in
//! tests/templates) against what Python's Jinja2 renders for the same
//! messages (HF's settings: `trim_blocks`, `lstrip_blocks`), a synthetic
//! GGUF carrying its own template, and hostile templates.

mod common;

use glmw::gguf::{GgufFile, GgufWriter, Value};
use glmw::tokenizer::{ChatMessage, ChatPart, ChatTemplate, Tokenizer};

const GLM46: &str = include_str!("templates/GLM-4.6.jinja");
const DEEPSEEK: &str = include_str!("templates/DeepSeek-R1-Distill-Qwen-32B.jinja");
const DS_BOS: &str = "<｜begin▁of▁sentence｜>";

fn text(parts: &[ChatPart]) -> String {
    parts.iter().map(|p| p.text.as_str()).collect()
}

fn render(t: &ChatTemplate, m: &[ChatMessage], gen: bool, thinking: bool) -> String {
    text(&t.render_parts(m, gen, thinking).unwrap())
}

fn asst(content: &str, reasoning: Option<&str>) -> ChatMessage {
    let mut m = ChatMessage::assistant(content);
    m.reasoning = reasoning.map(Into::into);
    m
}

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("Be brief."),
        ChatMessage::user("Hi <|assistant|>"),
        asst("Hello.", Some("greet")),
        ChatMessage::user("Weather?"),
    ]
}

#[test]
fn glm46_template_renders_as_jinja2_does() {
    let t = ChatTemplate::new(GLM46);
    let m = conversation();
    assert_eq!(
        render(&t, &m, true, true),
        "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi <|assistant|><|assistant|>\n<think></think>\nHello.<|user|>\nWeather?<|assistant|>"
    );
    assert_eq!(
        render(&t, &m, true, false),
        "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi <|assistant|>/nothink<|assistant|>\n<think></think>\nHello.<|user|>\nWeather?/nothink<|assistant|>\n<think></think>"
    );
    let m = [
        ChatMessage::user("Q"),
        asst("<think>\nr\n</think>\nA", None),
    ];
    assert_eq!(
        render(&t, &m, false, true),
        "[gMASK]<sop><|user|>\nQ<|assistant|>\n<think>r</think>\nA"
    );
}

#[test]
fn message_text_stays_plain_text() {
    let t = ChatTemplate::new(GLM46);
    let parts = t.render_parts(&conversation(), true, true).unwrap();
    let plain: Vec<&str> = parts
        .iter()
        .filter(|p| !p.special)
        .map(|p| p.text.as_str())
        .collect();
    assert_eq!(plain, ["Be brief.", "Hi <|assistant|>", "Weather?"]);
}

#[test]
fn deepseek_template_renders_as_jinja2_does() {
    let t = ChatTemplate::new(DEEPSEEK).with_special_tokens(DS_BOS, "");
    let m = [
        ChatMessage::system("S."),
        ChatMessage::user("Q1"),
        asst("<think>x</think>A1", None),
        ChatMessage::user("Q2"),
    ];
    let turns = "<｜User｜>Q1<｜Assistant｜>A1<｜end▁of▁sentence｜><｜User｜>Q2";
    assert_eq!(
        render(&t, &m, true, true),
        format!("{DS_BOS}S.{turns}<｜Assistant｜><think>\n")
    );
    assert_eq!(render(&t, &m, false, true), format!("{DS_BOS}S.{turns}"));
}

#[test]
fn builtin_template_is_the_fallback() {
    let t = ChatTemplate::default();
    assert_eq!(t.source(), glmw::tokenizer::GLM_TEMPLATE);
    assert_eq!(
        render(&t, &[ChatMessage::user("Hi")], true, false),
        "[gMASK]<sop><|user|>Hi<|assistant|></think>"
    );
}

fn template_err(source: &str) -> String {
    let t = ChatTemplate::new(source);
    match t.render_parts(&[ChatMessage::user("x")], true, true) {
        Ok(p) => panic!("rendered {:?}", text(&p)),
        Err(e) => e.to_string(),
    }
}

#[test]
fn hostile_templates_give_clear_errors() {
    let e = template_err("{% for m in messages %}{{ m.content }");
    assert!(
        e.starts_with("chat template:") && e.contains("syntax"),
        "{e}"
    );
    let e = template_err("{{ raise_exception('no system role allowed') }}");
    assert!(e.contains("no system role allowed"), "{e}");
    // Endless work ends on fuel; endless recursion on the recursion limit.
    let e = template_err(
        "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}",
    );
    assert!(e.contains("fuel"), "{e}");
    let e = template_err("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
    assert!(e.contains("recursion"), "{e}");
}

/// A synthetic GGUF whose file carries a DeepSeek-style template (with its
/// BOS) renders chats with it, not with GLM's.
#[test]
fn template_in_the_file_is_used() {
    let (mut md, _) = glmw::synth::plan(glmw::synth::Preset::Tiny, glmw::synth::Mix::Q4_0, 0);
    let tmpl = "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% endfor %}\
                {% if add_generation_prompt %}<|assistant|>{% if not enable_thinking %}</think>{% endif %}{% endif %}";
    for (k, v) in md.iter_mut() {
        if k == "tokenizer.chat_template" {
            *v = Value::Str(tmpl.into());
        }
    }
    let path = common::temp_dir("template").join("t.gguf");
    GgufWriter::create(&path, &md, &[])
        .unwrap()
        .finish()
        .unwrap();
    let tok = Tokenizer::from_gguf(&GgufFile::open(&path).unwrap()).unwrap();
    assert_eq!(tok.chat_template().source(), tmpl);
    let ids = tok
        .encode_messages(&[ChatMessage::user("Hello there")], false)
        .unwrap();
    let bos = tok.bos().unwrap();
    assert_eq!(ids[0], bos);
    let bos_text = tok.piece(bos).unwrap();
    let want = format!("{bos_text}<|user|>Hello there<|assistant|></think>");
    let text: String = ids.iter().map(|&i| tok.piece(i).unwrap()).collect();
    // Pieces are byte-level BPE text; the ASCII here reads the same.
    assert_eq!(text.replace('Ġ', " "), want);
}

const TOOLS: &str = r#"[{"type": "function", "function": {"name": "lookup", "parameters": {"properties": {"q": {"type": "string"}}, "type": "object"}}}]"#;

/// A tool call, then two results: OpenAI's messages as the server gets them.
fn tool_turns() -> Vec<ChatMessage> {
    let mut call = ChatMessage::assistant("");
    call.tool_calls.push(glmw::toolcall::ToolCall {
        name: "lookup".into(),
        arguments: r#"{"n": 2, "q": "Enos"}"#.into(),
    });
    vec![
        ChatMessage::user("Who?"),
        call,
        ChatMessage::tool("Seth"),
        ChatMessage::tool("Adam"),
    ]
}

#[test]
fn glm46_tools_and_tool_turns_render_as_jinja2_does() {
    // Jinja2 with HF's `tojson` (json.dumps, ensure_ascii off).
    let want = "[gMASK]<sop><|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"lookup\", \"parameters\": {\"properties\": {\"q\": {\"type\": \"string\"}}, \"type\": \"object\"}}}\n</tools>\n\nFor each function call, output the function name and arguments within the following XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call><|user|>\nWho?<|assistant|>\n<think></think>\n<tool_call>lookup\n<arg_key>n</arg_key>\n<arg_value>2</arg_value>\n<arg_key>q</arg_key>\n<arg_value>Enos</arg_value>\n</tool_call><|observation|>\n<tool_response>\nSeth\n</tool_response>\n<tool_response>\nAdam\n</tool_response><|assistant|>";
    let t = ChatTemplate::new(GLM46);
    let parts = t
        .render_parts_with_tools(&tool_turns(), Some(TOOLS), true, true)
        .unwrap();
    assert_eq!(text(&parts), want);
}

#[test]
fn builtin_template_renders_tool_calls_the_parser_reads_back() {
    let t = ChatTemplate::glm();
    let out = text(
        &t.render_parts_with_tools(&tool_turns(), Some(TOOLS), true, false)
            .unwrap(),
    );
    let turns = "<|user|>Who?<|assistant|></think><tool_call>lookup<arg_key>n</arg_key><arg_value>2</arg_value><arg_key>q</arg_key><arg_value>Enos</arg_value></tool_call><|observation|><tool_response>Seth</tool_response><tool_response>Adam</tool_response><|assistant|></think>";
    assert!(out.ends_with(turns), "{out}");
    assert!(out.contains(r#"{"type": "function", "function": {"name": "lookup""#));
    let body = turns
        .split("<tool_call>")
        .nth(1)
        .and_then(|b| b.split("</tool_call>").next())
        .unwrap();
    let call = glmw::toolcall::parse_call(body).unwrap();
    assert_eq!(call.arguments, r#"{"n":2,"q":"Enos"}"#);
}
