"""Every field the SDK (tinker 0.38.0) can send in a request this server accepts is handled, ignored or
refused (trajkit.tinker.fields), found by enumerating the SDK's own types; a refused one is a user error
naming it."""
import pydantic
import pytest
from tinker import types
from tinker.proto import tinker_public_pb2 as pb

from trajkit.errors import InputError
from trajkit.tinker import fields

PYDANTIC = {name: getattr(types, name) for name in fields.FIELDS if name not in ("ForwardBackwardRequest", "Datum")}
PROTO = {"ForwardBackwardRequest": pb.ForwardBackwardRequest, "Datum": pb.Datum}


def _sdk_fields(name: str) -> set[str]:
    if name in PROTO:
        return {f.name for f in PROTO[name].DESCRIPTOR.fields}
    model = PYDANTIC[name]
    assert issubclass(model, pydantic.BaseModel), name
    return set(model.model_fields)


@pytest.mark.parametrize("name", sorted(fields.FIELDS))
def test_every_sdk_field_is_handled_ignored_or_refused(name):
    spec = fields.FIELDS[name]
    sdk = _sdk_fields(name)
    assert sdk - spec.names() == set(), f"{name}: fields the SDK sends that the server neither handles nor refuses"
    assert spec.names() - sdk == set(), f"{name}: declared fields the SDK does not have"
    assert not (spec.handled & set(spec.ignored)) and not (spec.handled & set(spec.refused)) \
        and not (set(spec.ignored) & set(spec.refused))


def test_every_request_type_the_routes_take_is_declared():
    """The routes' request types (the SDK's, by name) are the ones declared, nested ones included."""
    assert set(fields.FIELDS) == {
        "SampleRequest", "SamplingParams", "CreateModelRequest", "LoraConfig", "OptimStepRequest", "AdamParams",
        "SaveWeightsRequest", "SaveWeightsForSamplerRequest", "LoadWeightsRequest", "CreateSamplingSessionRequest",
        "CreateSessionRequest", "GetInfoRequest", "FutureRetrieveRequest", "SessionHeartbeatRequest",
        "ForwardBackwardRequest", "Datum"}


def test_what_the_sdk_sends_by_default_passes_and_a_refused_value_names_its_field():
    """A default SampleRequest / CreateModelRequest as the SDK serialises it passes the check."""
    request = types.SampleRequest(prompt=types.ModelInput.from_ints([1, 2]), sampling_params=types.SamplingParams(),
                                  sampling_session_id="s", seq_id=0, prompt_logprobs=False,
                                  record_stability_info=False)
    body = request.model_dump(mode="json", exclude_unset=False)
    fields.check("SampleRequest", body)
    fields.check("SamplingParams", body["sampling_params"])
    model = types.CreateModelRequest(session_id="s", model_seq_id=0, base_model="m",
                                     lora_config=types.LoraConfig(rank=2))
    fields.check("CreateModelRequest", model.model_dump(mode="json"))
    with pytest.raises(InputError, match=r"SampleRequest\.prompt_alt_tokens_k=2: drawing alternative") as err:
        fields.check("SampleRequest", {**body, "prompt_alt_tokens_k": 2})
    assert err.value.field == "prompt_alt_tokens_k"
    with pytest.raises(InputError, match="has a field 'brand_new'"):
        fields.check("SampleRequest", {**body, "brand_new": 1})
