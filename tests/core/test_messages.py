"""Messages: immutable values, copied inputs, equality and hashing by value, strict validation."""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import pickle
import subprocess
import sys

import pytest

from chatmemory import (
    AiMessage,
    AudioContent,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from chatmemory.core.messages import MAX_ATTRIBUTE_DEPTH, checked_messages

MEDIA = [ImageContent, AudioContent, VideoContent, PdfFileContent]


def _with_attributes(kind: str, attributes: object) -> object:
    builders = {
        "user": lambda: UserMessage("hi", attributes=attributes),
        "ai": lambda: AiMessage("hi", attributes=attributes),
        "tool": lambda: ToolExecutionResultMessage("c1", "t", "r", attributes=attributes),
        "custom": lambda: CustomMessage(attributes),  # type: ignore[arg-type]
    }
    return builders[kind]()


KINDS = ["user", "ai", "tool", "custom"]


# ------------------------------------------------------------------------------------------ immutability


@pytest.mark.parametrize(
    ("message", "field", "value"),
    [
        (SystemMessage("s"), "text", "x"),
        (UserMessage("u"), "name", "x"),
        (AiMessage("a"), "text", "x"),
        (ToolExecutionResultMessage("c", "t", "r"), "text", "x"),
        (CustomMessage({"k": 1}), "attributes", {}),
        (ToolExecutionRequest("c", "t", "{}"), "arguments", "x"),
        (TextContent("t"), "text", "x"),
        (ImageContent(url="http://x"), "url", "y"),
    ],
)
def test_fields_cannot_be_assigned(message: object, field: str, value: object) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(message, field, value)


@pytest.mark.parametrize("kind", KINDS)
def test_attribute_dicts_are_copied_deeply(kind: str) -> None:
    nested = {"list": [1, {"deep": "x"}], "dict": {"a": [1, 2]}}
    message = _with_attributes(kind, nested)
    before = _with_attributes(kind, {"list": [1, {"deep": "x"}], "dict": {"a": [1, 2]}})
    nested["list"][1]["deep"] = "changed"  # type: ignore[index]
    nested["list"].append(3)  # type: ignore[attr-defined]
    nested["dict"]["a"].append(3)  # type: ignore[index]
    nested["new"] = 1
    assert message == before
    assert message.attributes == {"list": [1, {"deep": "x"}], "dict": {"a": [1, 2]}}  # type: ignore[attr-defined]


def test_content_and_request_lists_are_copied() -> None:
    parts: list[object] = ["one", TextContent("two")]
    user = UserMessage(parts)  # type: ignore[arg-type]
    parts.append("three")
    assert len(user.contents) == 2
    assert isinstance(user.contents, tuple)
    requests = [ToolExecutionRequest("c1", "t", "{}")]
    ai = AiMessage(tool_execution_requests=requests)
    requests.append(ToolExecutionRequest("c2", "t", "{}"))
    assert ai.tool_execution_requests == (ToolExecutionRequest("c1", "t", "{}"),)


def test_generator_contents_are_materialised() -> None:
    user = UserMessage(text for text in ["a", "b"])
    assert user.contents == (TextContent("a"), TextContent("b"))
    ai = AiMessage(tool_execution_requests=(ToolExecutionRequest(str(i), "t", "{}") for i in range(2)))
    assert len(ai.tool_execution_requests) == 2


# --------------------------------------------------------------------------------------- equality, hash


def _pairs() -> list[tuple[object, object]]:
    attributes = {"signature": "abc", "n": [1, 2.5, None, True], "d": {"x": {"y": "z"}}}
    return [
        (SystemMessage("s"), SystemMessage("s")),
        (UserMessage("u", name="n", attributes=attributes), UserMessage([TextContent("u")], "n", dict(attributes))),
        (
            AiMessage("a", [ToolExecutionRequest("c", "t", '{"a": 1}')], "think", attributes),
            AiMessage("a", (ToolExecutionRequest("c", "t", '{"a": 1}'),), "think", dict(attributes)),
        ),
        (
            ToolExecutionResultMessage("c", "t", "r", True, attributes),
            ToolExecutionResultMessage("c", "t", "r", True, attributes),
        ),
        (CustomMessage(attributes), CustomMessage(dict(attributes))),
        (
            UserMessage(ImageContent(url="u", detail_level="LOW")),
            UserMessage([ImageContent(url="u", detail_level="LOW")]),
        ),
    ]


@pytest.mark.parametrize(("left", "right"), _pairs())
def test_equal_by_value_and_hash_alike(left: object, right: object) -> None:
    assert left is not right
    assert left == right
    assert hash(left) == hash(right)
    assert len({left, right}) == 1


@pytest.mark.parametrize(("left", "right"), _pairs())
def test_a_message_hashed_here_and_unpickled_in_another_process_hashes_as_that_process_does(
    left: object, right: object
) -> None:
    # A message keeps its hash once computed; strings hash differently in every process (PYTHONHASHSEED),
    # so a pickled message must not carry it, or equal messages there would hash apart.
    hash(left)
    script = (
        "import pickle, sys; left, right = pickle.loads(sys.stdin.buffer.read()); "
        "assert hash(left) == hash(right) and {left: 1}[right] == 1 and left == right; print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps((left, right)),
        capture_output=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.strip() == b"ok"


def test_dict_key_order_does_not_matter() -> None:
    left = CustomMessage({"a": 1, "b": {"x": 1, "y": 2}})
    right = CustomMessage({"b": {"y": 2, "x": 1}, "a": 1})
    assert left == right
    assert hash(left) == hash(right)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (SystemMessage("s"), SystemMessage("t")),
        (SystemMessage("s"), UserMessage("s")),
        (UserMessage("u"), UserMessage("u", name="n")),
        (UserMessage("u", attributes={"a": 1}), UserMessage("u", attributes={"a": 2})),
        (AiMessage("a"), AiMessage("a", thinking="t")),
        (
            AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "t", "{}")]),
            AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "t", "{ }")]),
        ),
        (ToolExecutionResultMessage("c", "t", "r"), ToolExecutionResultMessage("c", "t", "r", is_error=True)),
        (CustomMessage({"a": [1, 2]}), CustomMessage({"a": [2, 1]})),
        (CustomMessage({"a": {"b": 1}}), CustomMessage({"a": [["b", 1]]})),
    ],
)
def test_different_values_are_unequal(left: object, right: object) -> None:
    assert left != right


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ({"a": 1}, {"a": True}),
        ({"a": 0}, {"a": False}),
        ({"a": 1}, {"a": 1.0}),
        ({"a": [True]}, {"a": [1]}),
        ({"a": {"b": 0.0}}, {"a": {"b": -0.0}}),
    ],
)
def test_json_distinct_attribute_values_are_unequal(left: dict[str, object], right: dict[str, object]) -> None:
    # 1, 1.0 and true are different JSON values and persist differently; a store diffing by equality
    # would otherwise keep the old one when the new one was written.
    assert CustomMessage(left) != CustomMessage(right)
    assert AiMessage("a", attributes=left) != AiMessage("a", attributes=right)


def test_strict_attribute_equality_everywhere() -> None:
    assert UserMessage("u", attributes={"a": 1}) != UserMessage("u", attributes={"a": True})
    assert ToolExecutionResultMessage("c", "t", "r", attributes={"a": 1}) != ToolExecutionResultMessage(
        "c", "t", "r", attributes={"a": 1.0}
    )
    assert UserMessage("u", attributes={"a": 1}) == UserMessage("u", attributes={"a": 1})
    assert SystemMessage("s") != "s"


# --------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "bad",
    [
        {1, 2},
        (1, 2),
        b"bytes",
        bytearray(b"x"),
        object(),
        {1: "non-str key"},
        float("nan"),
        float("inf"),
        -float("inf"),
        2**64,
        -(2**63) - 1,
        [1, {"inner": {3}}],
        {"inner": (1,)},
        complex(1, 2),
    ],
    ids=lambda value: type(value).__name__,
)
def test_non_json_attribute_values_raise_type_error_naming_the_key(kind: str, bad: object) -> None:
    with pytest.raises(TypeError, match="the_key"):
        _with_attributes(kind, {"the_key": bad})


@pytest.mark.parametrize("kind", KINDS)
def test_non_str_attribute_key_raises(kind: str) -> None:
    with pytest.raises(TypeError, match="42"):
        _with_attributes(kind, {42: "x"})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "good", ["s", 0, -(2**63), 2**64 - 1, 1.5, -0.0, True, None, [], {}, [1, "a", None, {"b": [False]}]]
)
def test_json_native_attribute_values_are_accepted(kind: str, good: object) -> None:
    message = _with_attributes(kind, {"k": good})
    assert message.attributes == {"k": good}  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["user", "ai", "tool"])
def test_attributes_must_be_a_mapping(kind: str) -> None:
    with pytest.raises(TypeError):
        _with_attributes(kind, [("k", "v")])


def test_user_message_text_helpers() -> None:
    assert UserMessage("hi").contents == (TextContent("hi"),)
    assert UserMessage("hi") == UserMessage.from_text("hi")
    assert UserMessage.from_text("hi", name="ann") == UserMessage("hi", name="ann")
    assert UserMessage("hi").text == "hi"
    assert UserMessage("hi").has_single_text()
    assert UserMessage(["a", "b"]).text == "a\nb"
    assert not UserMessage(["a", "b"]).has_single_text()
    for multi in (
        UserMessage([ImageContent(url="u")]),
        UserMessage(["a", ImageContent(base64_data="AAAA", mime_type="image/png")]),
    ):
        assert not multi.has_single_text()
        with pytest.raises(ValueError, match=r"also holds ImageContent: read \.contents"):
            _ = multi.text


@pytest.mark.parametrize("media", MEDIA)
def test_media_needs_url_or_base64(media: type) -> None:
    with pytest.raises(ValueError, match="url or base64_data"):
        media()
    with pytest.raises(ValueError, match="url or base64_data"):
        media(mime_type="image/png")
    assert media(url="https://example.org/x").url == "https://example.org/x"
    assert media(base64_data="AAAA", mime_type="x/y").base64_data == "AAAA"


@pytest.mark.parametrize(
    "build",
    [
        lambda: SystemMessage(1),
        lambda: SystemMessage(None),
        lambda: TextContent(b"x"),
        lambda: UserMessage(1),
        lambda: UserMessage(None),
        lambda: UserMessage([1]),
        lambda: UserMessage({"not": "contents"}),
        lambda: UserMessage(b"bytes"),
        lambda: UserMessage("u", name=1),
        lambda: AiMessage(text=1),
        lambda: AiMessage(thinking=b"x"),
        lambda: AiMessage(tool_execution_requests=["call"]),
        lambda: AiMessage(tool_execution_requests=[{"id": "c", "name": "t", "arguments": "{}"}]),
        lambda: ToolExecutionRequest(1, "t", "{}"),
        lambda: ToolExecutionRequest("c", None, "{}"),
        lambda: ToolExecutionRequest("c", "t", {"a": 1}),
        lambda: ToolExecutionResultMessage(1, "t", "r"),
        lambda: ToolExecutionResultMessage("c", "t", None),
        lambda: ToolExecutionResultMessage("c", "t", "r", is_error=1),
        lambda: ToolExecutionResultMessage("c", "t", "r", is_error="yes"),
        lambda: ImageContent(url=1),
        lambda: ImageContent(url="u", detail_level=1),
        lambda: AudioContent(base64_data=b"AAAA"),
        lambda: PdfFileContent(url="u", mime_type=1),
    ],
)
def test_wrong_field_types_raise_type_error(build: object) -> None:
    with pytest.raises(TypeError):
        build()  # type: ignore[operator]


def test_user_message_needs_a_part() -> None:
    with pytest.raises(ValueError, match="at least one"):
        UserMessage([])


def test_tool_ids_may_be_none() -> None:
    assert ToolExecutionRequest(None, "t", "{}").id is None
    assert ToolExecutionResultMessage(None, "t", "r").id is None


def test_arguments_kept_byte_for_byte() -> None:
    raw = '{ "b" : 1,"a":[1.0,  2e3], "u": "\\u00e9" }'
    assert (
        AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "t", raw)]).tool_execution_requests[0].arguments
        == raw
    )


def test_has_tool_execution_requests() -> None:
    assert not AiMessage("a").has_tool_execution_requests()
    assert AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "t", "{}")]).has_tool_execution_requests()


def test_nan_check_is_not_fooled_by_float_subclasses() -> None:
    class Weird(float):
        pass

    with pytest.raises(TypeError, match="k"):
        CustomMessage({"k": Weird(math.nan)})


# ------------------------------------------------------------------------------- nesting, enums, None


def _nested(depth: int, container: str) -> object:
    """A value with ``depth`` lists (or dicts) around the innermost ``1``."""
    value: object = 1
    for _ in range(depth):
        value = [value] if container == "list" else {"k": value}
    return value


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("container", ["list", "dict"])
def test_attributes_may_nest_up_to_the_depth_limit(kind: str, container: str) -> None:
    deepest = _nested(MAX_ATTRIBUTE_DEPTH, container)
    message = _with_attributes(kind, {"k": deepest})
    assert message.attributes == {"k": deepest}  # type: ignore[attr-defined]
    # Hashing, equality and repr walk the whole value: they must cope with the deepest one allowed.
    assert message == _with_attributes(kind, {"k": _nested(MAX_ATTRIBUTE_DEPTH, container)})
    assert hash(message) == hash(_with_attributes(kind, {"k": _nested(MAX_ATTRIBUTE_DEPTH, container)}))
    assert repr(message)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("depth", [MAX_ATTRIBUTE_DEPTH + 1, 332, 1_000, 50_000])
@pytest.mark.parametrize("container", ["list", "dict"])
def test_deeper_attributes_raise_value_error_naming_the_limit(kind: str, depth: int, container: str) -> None:
    with pytest.raises(ValueError, match=rf"'the_key' nests .* more than {MAX_ATTRIBUTE_DEPTH} levels"):
        _with_attributes(kind, {"the_key": _nested(depth, container)})


def test_the_depth_limit_is_documented_as_100() -> None:
    assert MAX_ATTRIBUTE_DEPTH == 100


class Color(str, enum.Enum):
    RED = "red"


class Size(enum.IntEnum):
    LARGE = 3


class Ratio(float, enum.Enum):
    HALF = 0.5


class Plain(enum.Enum):
    A = "a"


@pytest.mark.parametrize("kind", KINDS)
def test_str_and_int_enum_members_are_stored_as_their_plain_value(kind: str) -> None:
    message = _with_attributes(kind, {"color": Color.RED, Color.RED: [Size.LARGE, {"r": Ratio.HALF}]})
    assert message.attributes == {"color": "red", "red": [3, {"r": 0.5}]}  # type: ignore[attr-defined]
    stored = message.attributes  # type: ignore[attr-defined]
    assert type(stored["color"]) is str and type(next(iter(stored))) is str
    assert type(stored["red"][0]) is int and type(stored["red"][1]["r"]) is float
    assert message == _with_attributes(kind, {"color": "red", "red": [3, {"r": 0.5}]})


def test_str_subclasses_lose_their_own_str() -> None:
    class Shouting(str):
        def __str__(self) -> str:
            return self.upper()

    assert AiMessage(attributes={"k": Shouting("quiet")}).attributes == {"k": "quiet"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_plain_enum_member_is_refused_with_the_fix(kind: str) -> None:
    with pytest.raises(TypeError, match=r"'the_key' holds the enum member Plain\.A.*Plain\.A\.value"):
        _with_attributes(kind, {"the_key": Plain.A})


def test_none_tool_execution_requests_means_none() -> None:
    message = AiMessage("x", tool_execution_requests=None)
    assert message == AiMessage("x")
    assert message.tool_execution_requests == ()
    assert not message.has_tool_execution_requests()


@pytest.mark.parametrize("bad", [5, "call", {"id": "c"}, ToolExecutionRequest("c", "t", "{}")])
def test_tool_execution_requests_that_are_not_an_iterable_of_requests_raise(bad: object) -> None:
    with pytest.raises(TypeError, match="tool_execution_requests"):
        AiMessage("x", tool_execution_requests=bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- checked lists


def test_a_checked_list_is_a_tuple_of_what_an_iterable_gave_once() -> None:
    given = [SystemMessage("s"), UserMessage("u"), AiMessage("a")]
    taken = iter(given)
    assert checked_messages(taken) == tuple(given)
    assert next(taken, None) is None


def test_a_subclass_of_a_message_type_passes_the_check() -> None:
    class Tagged(UserMessage):
        __slots__ = ()

    message = Tagged("hi")
    assert checked_messages([UserMessage("a"), message]) == (UserMessage("a"), message)


@pytest.mark.parametrize("bad", [{"role": "user"}, "text", None, 3])
def test_anything_else_in_a_list_is_refused_by_its_type(bad: object) -> None:
    with pytest.raises(TypeError, match=f"got {type(bad).__name__}"):
        checked_messages([UserMessage("a"), bad, AiMessage("b")])
