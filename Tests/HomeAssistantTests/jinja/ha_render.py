"""Renders Home Assistant MQTT command templates with the real Jinja2, as Home Assistant does.

Read from the file named on the command line: a JSON list of jobs, a command template's
{"template": str, "variables": {...}} or a value template's {"template": str, "payload": str}.
Written to stdout: a JSON list, one entry per job, {"ok": <text>} or {"error": <why>}.
One process renders a whole batch (HomeAssistantCommandsTests renders every command Home
Assistant can send over the offered ranges in one go).

What is Home Assistant's here (Home Assistant 2026.2, github.com/home-assistant/core,
Apache-2.0; see Tests/Fixtures/LICENSE-Apache-2.0):
- the environment: an ImmutableSandboxedEnvironment whose undefined renders empty
  (homeassistant/helpers/template/__init__.py, TemplateEnvironment, not strict), and logs as
  make_logging_undefined's LoggingUndefined does: a warning when an undefined is rendered,
  iterated or tested for truth, an error when it raises; each job's such lines are its "log";
- the filters and functions our templates use, with Home Assistant's signatures and meaning
  (homeassistant/helpers/template/extensions/type_cast.py: float, int, is_number;
  extensions/math.py: round with precision, method and default, and the min/max globals);
  Jinja2's own max, min, default and string filters are Home Assistant's too;
- MqttCommandTemplate.async_render (homeassistant/components/mqtt/models.py): the variables are
  {"value": value} updated by the caller's variables (hs: "hue", "sat"), rendered with
  parse_result=False, so the payload is the rendered text, stripped; a text that literal_evals to
  bytes would be sent as those bytes (none of ours does; reported as an error if one did).
- Template.async_render_with_possible_json_value (homeassistant/helpers/template/__init__.py),
  as MqttValueTemplate calls it without a default: `value` is the payload and `value_json` its
  JSON where it parses; on a Jinja2 TemplateError (an undefined key's key) the payload itself is
  the result (and "Error parsing value" is logged), while any other error (float of a word)
  raises, and the message is dropped.
The functions are written here for Python 3.11 (Home Assistant's use 3.14 syntax), to the same
behaviour; a failure to convert without a default raises ValueError as raise_no_default does.
"""

from ast import literal_eval
import json
import math
import sys

import jinja2
import jinja2.filters
from jinja2.sandbox import ImmutableSandboxedEnvironment

_SENTINEL = object()


def _no_default(name, value):
    # homeassistant/helpers/template/helpers.py raise_no_default
    raise ValueError(
        f"Template error: {name} got invalid input '{value}' when rendering or compiling "
        "template but no default was specified"
    )


def forgiving_float(value, default=_SENTINEL):
    """type_cast.py: float(value), or default, or an error."""
    try:
        return float(value)
    except (ValueError, TypeError):
        if default is _SENTINEL:
            _no_default("float", value)
        return default


def forgiving_int(value, default=_SENTINEL, base=10):
    """type_cast.py: Jinja2's int filter with the sentinel as its default, an error without one."""
    result = jinja2.filters.do_int(value, default=default, base=base)
    if result is _SENTINEL:
        _no_default("int", value)
    return result


def is_number(value):
    """type_cast.py: a finite float(value)."""
    try:
        number = float(value)
    except (ValueError, TypeError):
        return False
    return math.isfinite(number)


def forgiving_round(value, precision=0, method="common", default=_SENTINEL):
    """math.py: Python's round (half to even) at `precision`, an int at precision 0."""
    try:
        multiplier = float(10**precision)
        if method == "ceil":
            value = math.ceil(float(value) * multiplier) / multiplier
        elif method == "floor":
            value = math.floor(float(value) * multiplier) / multiplier
        elif method == "half":
            value = round(float(value) * 2) / 2
        else:
            value = round(float(value), precision)
        return int(value) if precision == 0 else value
    except (ValueError, TypeError):
        if default is _SENTINEL:
            _no_default("round", value)
        return default


def _min_max_global(name):
    """math.py: the min/max globals, over one iterable or over their arguments."""

    @jinja2.pass_environment
    def function(environment, *args, **kwargs):
        builtin = environment.filters[name]
        if len(args) == 0:
            raise TypeError(f"{name} expected at least 1 argument, got 0")
        if len(args) == 1:
            try:
                iter(args[0])
            except TypeError:
                raise TypeError(f"'{type(args[0]).__name__}' object is not iterable") from None
            return builtin(environment, args[0], **kwargs)
        return builtin(environment, args, **kwargs)

    return function


LOG = []  # the current job's log lines, as Home Assistant's logger would write them


class LoggingUndefined(jinja2.Undefined):
    """make_logging_undefined(strict=False): Jinja2's Undefined, logged where it is used."""

    def _log(self, level):
        LOG.append(f"{level}: Template variable {level.lower()}: {self._undefined_message}")

    def _fail_with_undefined_error(self, *args, **kwargs):
        try:
            return super()._fail_with_undefined_error(*args, **kwargs)
        except self._undefined_exception:
            self._log("ERROR")
            raise

    def __str__(self):
        self._log("WARNING")
        return super().__str__()

    def __iter__(self):
        self._log("WARNING")
        return super().__iter__()

    def __bool__(self):
        self._log("WARNING")
        return super().__bool__()


def environment():
    env = ImmutableSandboxedEnvironment(undefined=LoggingUndefined)
    for name, function in {"float": forgiving_float, "int": forgiving_int}.items():
        env.filters[name] = function
        env.globals[name] = function
    env.filters["is_number"] = is_number
    env.globals["is_number"] = is_number
    env.tests["is_number"] = is_number
    env.filters["round"] = forgiving_round
    env.globals["min"] = _min_max_global("min")
    env.globals["max"] = _min_max_global("max")
    return env


def render(env, cache, template, variables):
    """MqttCommandTemplate.async_render with `variables` (which hold `value`)."""
    compiled = cache.get(template)
    if compiled is None:
        compiled = cache[template] = env.from_string(template)
    payload = compiled.render(dict(variables)).strip()
    try:
        if isinstance(literal_eval(payload), bytes):
            raise ValueError(f"renders to bytes: {payload}")
    except (ValueError, TypeError, SyntaxError, MemoryError) as error:
        if "renders to bytes" in str(error):
            raise
    return payload


def render_value(env, cache, template, payload):
    """Template.async_render_with_possible_json_value(payload), no default given."""
    compiled = cache.get(template)
    if compiled is None:
        compiled = cache[template] = env.from_string(template)
    variables = {"value": payload}
    try:
        variables["value_json"] = json.loads(payload)
    except ValueError:
        pass
    try:
        return compiled.render(variables).strip()
    except jinja2.TemplateError as error:
        LOG.append(f"ERROR: Error parsing value: {error} (value: {payload}, template: {template})")
        return payload


def main():
    with open(sys.argv[1], encoding="utf-8") as file:
        jobs = json.load(file)
    env, cache, out = environment(), {}, []
    for job in jobs:
        LOG.clear()
        try:
            if "payload" in job:
                out.append({"ok": render_value(env, cache, job["template"], job["payload"])})
            else:
                out.append({"ok": render(env, cache, job["template"], job["variables"])})
        except Exception as error:  # Home Assistant raises MqttCommandTemplateException: nothing is sent
            out.append({"error": f"{type(error).__name__}: {error}"})
        out[-1]["log"] = list(LOG)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
