"""Drive `glmw serve` through the official `openai` client, as chat UIs and
editor plugins do: tests/serve.rs starts the server (built-in model,
--parallel 2, -c 512: room for the tools section) and runs this with its base URL. Every wait is
bounded in count and time; any failure raises, so the exit status is
non-zero."""

import concurrent.futures
import json
import sys
import time
import urllib.error
import urllib.request

import openai

BASE = sys.argv[1]  # http://127.0.0.1:PORT
client = openai.OpenAI(base_url=BASE + "/v1", api_key="none", timeout=120, max_retries=0)
GREEDY = dict(temperature=0, max_tokens=8)
HELLO = [{"role": "user", "content": "Who begat Enos?"}]


def get(path):
    with urllib.request.urlopen(BASE + path, timeout=10) as r:
        return json.loads(r.read())


def post_raw(path, body):
    """(status, parsed body) of a POST with `body` sent as it is."""
    req = urllib.request.Request(BASE + path, data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_for(what, check, seconds):
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds * 10)):
        if check():
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def healthy():
    try:
        return get("/health")["status"] == "ok"
    except (OSError, ValueError):
        return False


def chat_plain():
    r = client.chat.completions.create(model="glmw-tiny", messages=HELLO, **GREEDY)
    c = r.choices[0]
    assert c.message.role == "assistant" and isinstance(c.message.content, str), r
    assert c.finish_reason in ("stop", "length"), r
    assert 0 < r.usage.completion_tokens <= 8, r.usage
    assert r.usage.prompt_tokens > 0, r.usage
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    return c.message.content


def chat_streamed(expected):
    stream = client.chat.completions.create(
        model="glmw-tiny", messages=HELLO, stream=True,
        stream_options={"include_usage": True}, **GREEDY)
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text == expected, (text, expected)  # greedy: the same reply
    assert finish in ("stop", "length") and usage.completion_tokens <= 8, (finish, usage)


def completion():
    r = client.completions.create(model="glmw-tiny", prompt="In the beginning", **GREEDY)
    assert isinstance(r.choices[0].text, str) and r.choices[0].text, r
    assert 0 < r.usage.completion_tokens <= 8, r.usage
    return r.choices[0].text


def two_at_once(expected_chat, expected_completion):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        a = pool.submit(chat_plain)
        b = pool.submit(completion)
        got = (a.result(timeout=120), b.result(timeout=120))
    assert got == (expected_chat, expected_completion), got


def cancelled_stream():
    """A client that stops reading ends its generation: the slot is idle
    again long before 200 tokens could have been generated."""
    stream = client.completions.create(model="glmw-tiny", prompt="And God said",
                                       max_tokens=200, stream=True)
    for _ in stream:
        break
    stream.close()
    wait_for("the cancelled slot to be idle",
             lambda: get("/health")["slots_processing"] == 0, 15)


def malformed():
    cases = [
        ("/v1/chat/completions", "{not json"),
        ("/v1/chat/completions", '{"messages": 5}'),
        ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "x"}'),
        ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi"}], "temperature": -1}'),
        ("/v1/completions", '{"prompt": ' + json.dumps("and the LORD said " * 200) + "}"),
        ("/v1/nothing", "{}"),
    ]
    for path, body in cases:
        status, err = post_raw(path, body)
        assert 400 <= status < 500, (path, body[:40], status, err)
        e = err["error"]
        assert e["message"] and e["type"] and e["code"] == status, err
    try:
        client.chat.completions.create(model="glmw-tiny", messages=[], **GREEDY)
        raise AssertionError("empty messages were accepted")
    except openai.BadRequestError:
        pass


TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Find a name.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]
CALLED = HELLO + [
    {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_0", "type": "function",
        "function": {"name": "lookup", "arguments": '{"q": "Enos"}'}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "Seth"},
]


def tools_round_trip():
    """Tools go into the prompt through the template, a tool call and its
    result come back in; the tiny model emits no real calls, so the parsing
    itself is covered by unit tests (src/toolcall.rs)."""
    plain = client.chat.completions.create(model="glmw-tiny", messages=CALLED, **GREEDY)
    r = client.chat.completions.create(model="glmw-tiny", messages=CALLED, tools=TOOLS, **GREEDY)
    assert r.usage.prompt_tokens > plain.usage.prompt_tokens, (r.usage, plain.usage)
    c = r.choices[0]
    assert c.finish_reason in ("stop", "length", "tool_calls"), r
    assert c.message.content is not None or c.message.tool_calls, r


def reasoning_split():
    """Thinking on: the prompt ends inside <think>, and the tiny model never
    closes it, so its whole reply is reasoning_content, streamed or not."""
    think = dict(extra_body={"chat_template_kwargs": {"enable_thinking": True}}, **GREEDY)
    r = client.chat.completions.create(model="glmw-tiny", messages=HELLO, **think)
    m = r.choices[0].message
    reasoning = (m.model_extra or {}).get("reasoning_content")
    assert m.content == "" and isinstance(reasoning, str) and reasoning, m
    streamed = {"content": "", "reasoning_content": ""}
    for chunk in client.chat.completions.create(
            model="glmw-tiny", messages=HELLO, stream=True, **think):
        for c in chunk.choices:
            streamed["content"] += c.delta.content or ""
            streamed["reasoning_content"] += (c.delta.model_extra or {}).get(
                "reasoning_content") or ""
    assert streamed == {"content": "", "reasoning_content": reasoning}, (streamed, reasoning)


def main():
    wait_for("/health", healthy, 60)
    models = client.models.list()
    assert [m.id for m in models.data] == ["glmw-tiny"], models
    expected_chat = chat_plain()
    chat_streamed(expected_chat)
    expected_completion = completion()
    two_at_once(expected_chat, expected_completion)
    cancelled_stream()
    malformed()
    tools_round_trip()
    reasoning_split()
    assert chat_plain() == expected_chat  # still serving, and the same
    print("serve: all checks passed")


main()
