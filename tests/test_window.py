"""Fitting the window to the model: one pure function (budget.fit_window), applied wherever engines open."""

from __future__ import annotations

from contextmem.budget import FITTED, fit_settings, fit_to_model, fit_window
from contextmem.engine import ContextEngine
from contextmem.memory import HashEmbedder
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore, ScriptedLLM


def test_without_a_model_window_the_settings_and_the_model_table_decide():
    fit = fit_window(Settings())
    assert (fit.window.context_window, fit.window.max_tokens) == (50_000, 4096)
    assert (fit.summary_max_tokens, fit.summary_chunk_tokens) == (3000, 6000) and fit.fitted == ()
    assert (
        fit_window(Settings(model="openai:gpt-4o", agent_max_context_tokens=200_000)).window.context_window
        == 128_000
    )


def test_a_small_model_window_fits_everything_the_user_left_unset():
    fit = fit_window(Settings(), model_window=8192, model_reply=512)
    assert (fit.window.context_window, fit.window.max_tokens) == (8192, 512)
    # The summary: 35% of the window; the chunk what a call holding 1.5 summaries leaves.
    assert (fit.summary_max_tokens, fit.summary_chunk_tokens) == (2867, 8192 - 3 * 2867 // 2 - 400)
    assert dict(fit.fitted) == {
        "context_window": 8192,
        "max_tokens": 512,
        "summary_max_tokens": 2867,
        "summary_chunk_tokens": 3492,
    }
    tenth = fit_window(Settings(summary_window_share=0.1), model_window=8192, model_reply=512)
    assert tenth.summary_max_tokens == 819
    # A reply that would take half the window: the reserve is an eighth instead.
    assert fit_window(Settings(), model_window=8192, model_reply=6000).window.max_tokens == 1024
    # The cap still bounds a large model.
    assert fit_window(Settings(), model_window=131_072).window.context_window == 50_000


def test_what_the_user_set_wins_but_a_summary_call_must_still_fit_the_model():
    loaded = Settings.load(env={}, context_window=3000, summary_max_tokens=5000)
    fit = fit_window(loaded, model_window=8192)
    assert fit.window.context_window == 3000  # explicitly set: kept
    assert fit.summary_max_tokens == 8192 // 2  # 5000 and a chunk cannot share one call
    assert "context_window" not in dict(fit.fitted) and "summary_max_tokens" not in dict(fit.fitted)
    # A value passed to Settings(...) is the user's too, though its source says "default".
    assert fit_window(Settings(context_window=3000), model_window=8192).window.context_window == 3000


def test_fitted_settings_say_so_and_fitting_again_changes_nothing():
    llm = ScriptedLLM(context_window=8192)
    fitted = fit_settings(Settings(), llm)
    assert fitted.context_window == 8192 and fitted.sources["context_window"].startswith(FITTED)
    assert fit_settings(fitted, llm) == fitted
    again, first = fit_to_model(fitted, llm), fit_to_model(Settings(), llm)
    assert (again.window, again.summary_max_tokens, again.summary_chunk_tokens) == (
        first.window,
        first.summary_max_tokens,
        first.summary_chunk_tokens,
    )
    assert fit_settings(Settings(), ScriptedLLM()) == Settings()  # a model that states no window


async def test_a_library_user_of_contextmem_open_plans_against_the_models_window(tmp_path):
    """Issue 13: ContextMem.open with an 8k model gave engines the 50,000-token cap."""
    settings = Settings(workspace=tmp_path / "ws")
    llm = ScriptedLLM(default="not a summary", context_window=8192)
    runtime = await ContextMem.open(settings, llm=llm, store=InMemorySessionStore(), embedder=HashEmbedder())
    engine = await runtime.session("s")
    assert engine.window.context_window == 8192
    assert runtime.settings.context_window == 8192 and runtime.settings.sources["context_window"].startswith(
        FITTED
    )
    assert engine.summarizer is not None and engine.summarizer.max_tokens == 2867
    await runtime.close()

    mine = Settings.load(env={}, workspace=str(tmp_path / "ws2"), context_window=6000)
    runtime = await ContextMem.open(mine, llm=llm, store=InMemorySessionStore(), embedder=HashEmbedder())
    engine = await runtime.session("s")
    assert engine.window.context_window == 6000  # an explicitly set context_window still wins
    await runtime.close()


async def test_an_engine_opened_directly_fits_its_llm_and_an_explicit_window_wins(tmp_path):
    llm = ScriptedLLM(context_window=8192)
    engine = await ContextEngine.open(
        "s", store=InMemorySessionStore(), settings=Settings(), workspace_dir=tmp_path, llm=llm
    )
    assert engine.window.context_window == 8192
    engine.reconfigure(Settings.load(env={}, context_window=4000))
    assert engine.window.context_window == 4000


def test_without_a_model_the_summary_still_fits_the_window_it_is_sent_in():
    """A small window set by hand, no model: a 3,000-token summary would leave no room for history."""
    small = fit_window(Settings.load(env={}, context_window=3000))
    assert (small.window.context_window, small.summary_max_tokens) == (3000, 1050)  # 35%
    eighth = fit_window(Settings.load(env={}, context_window=3000, summary_window_share=0.125))
    assert eighth.summary_max_tokens == 375
    assert fit_window(Settings.load(env={})).summary_max_tokens == 3000  # the default window is larger
    mine = fit_window(Settings.load(env={}, context_window=3000, summary_max_tokens=900))
    assert mine.summary_max_tokens == 900  # sized by the user: kept
