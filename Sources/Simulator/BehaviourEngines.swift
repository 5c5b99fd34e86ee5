import HomeModel

// The behaviour engines, one per kind: garage door, lock, thermostat, outlet, drift and script.

func makeEngine(_ kind: BehaviourKind) -> (any BehaviourEngine)? {
    switch kind {
    case .none: nil
    case .garageDoor(let travelTime): GarageDoorEngine(travelTime: travelTime)
    case .lock(let delay): LockEngine(delay: delay)
    case .thermostat(let step, let every): ThermostatEngine(step: step, every: every)
    case .outlet: OutletEngine()
    case .position(let travelTime): PositionEngine(travelTime: travelTime)
    case .settle(let rule, let delay): SettleEngine(rule: rule, delay: delay)
    case .drift(let characteristic, let step, let every, let min, let max):
        DriftEngine(
            type: StandardUUID.longForm(characteristic), step: step, every: every, configuredMin: min,
            configuredMax: max)
    case .script(let characteristic, let steps, let repeats):
        ScriptEngine(type: StandardUUID.longForm(characteristic), steps: steps, repeats: repeats)
    }
}

// MARK: - Garage door

/// The door has a position (0 closed … 1 open) that changes linearly while it moves, so a
/// reversal or an obstruction half-way leaves it half-way, and the next travel takes only the
/// remaining distance.
struct GarageDoorEngine: BehaviourEngine {
    enum Door {
        static let open: UInt64 = 0, closed: UInt64 = 1, opening: UInt64 = 2, closing: UInt64 = 3, stopped: UInt64 = 4
    }

    let travelTime: Double
    var position = 0.0
    /// +1 opening, -1 closing, with the time the current movement started.
    var motion: (direction: Double, since: Double)?
    var obstructed = false

    init(travelTime: Double) { self.travelTime = max(0, travelTime) }

    func position(at now: Double) -> Double {
        guard let motion else { return position }
        guard travelTime > 0 else { return motion.direction > 0 ? 1 : 0 }
        return min(1, max(0, position + motion.direction * (now - motion.since) / travelTime))
    }

    mutating func start(_ ctx: inout BehaviourContext) {
        obstructed = ctx.value(HAPType.obstructionDetected)?.boolValue ?? false
        switch ctx.number(HAPType.currentDoorState).flatMap({ UInt64(exactly: $0) }) {
        case Door.open?: position = 1
        case Door.closed?: position = 0
        case Door.opening?:
            position = 0.5
            if !obstructed { move(toward: 1, &ctx) }
        case Door.closing?:
            position = 0.5
            if !obstructed { move(toward: 0, &ctx) }
        default: position = 0.5
        }
    }

    mutating func didWrite(_ type: String, _ ctx: inout BehaviourContext) {
        guard type == HAPType.targetDoorState, !obstructed, let target = ctx.number(HAPType.targetDoorState) else {
            return
        }
        move(toward: target == Double(Door.open) ? 1 : 0, &ctx)
    }

    mutating func move(toward goal: Double, _ ctx: inout BehaviourContext) {
        position = position(at: ctx.now)
        motion = nil
        ctx.cancel()
        if position == goal {
            ctx.setNumber(HAPType.currentDoorState, Double(goal == 1 ? Door.open : Door.closed))
            return
        }
        let direction: Double = goal > position ? 1 : -1
        motion = (direction, ctx.now)
        ctx.setNumber(HAPType.currentDoorState, Double(direction > 0 ? Door.opening : Door.closing))
        ctx.schedule(after: abs(goal - position) * travelTime)
    }

    mutating func fire(tag: Int, _ ctx: inout BehaviourContext) {
        guard let motion else { return }
        position = motion.direction > 0 ? 1 : 0
        self.motion = nil
        ctx.setNumber(HAPType.currentDoorState, Double(position == 1 ? Door.open : Door.closed))
    }

    mutating func setObstructed(_ obstructed: Bool, _ ctx: inout BehaviourContext) -> Bool {
        self.obstructed = obstructed
        ctx.set(HAPType.obstructionDetected, .bool(obstructed))
        if obstructed, motion != nil {
            position = position(at: ctx.now)
            motion = nil
            ctx.cancel()
            ctx.setNumber(HAPType.currentDoorState, Double(Door.stopped))
        }
        return true
    }
}

// MARK: - Lock

struct LockEngine: BehaviourEngine {
    let delay: Double

    mutating func didWrite(_ type: String, _ ctx: inout BehaviourContext) {
        guard type == HAPType.lockTargetState else { return }
        ctx.cancel()
        if ctx.number(HAPType.lockTargetState) != ctx.number(HAPType.lockCurrentState) {
            ctx.schedule(after: delay)
        }
    }

    mutating func fire(tag: Int, _ ctx: inout BehaviourContext) {
        guard let target = ctx.number(HAPType.lockTargetState) else { return }
        ctx.setNumber(HAPType.lockCurrentState, target)
    }
}

// MARK: - Thermostat

struct ThermostatEngine: BehaviourEngine {
    enum Mode { static let off = 0.0, heat = 1.0, cool = 2.0, auto = 3.0 }

    let step: Double
    let every: Double
    var ticking = false

    init(step: Double, every: Double) {
        self.step = step > 0 ? step : ServiceBehaviour.defaultThermostatStep
        self.every = every > 0 ? every : ServiceBehaviour.defaultThermostatInterval
    }

    mutating func start(_ ctx: inout BehaviourContext) { evaluate(&ctx) }

    mutating func didWrite(_ type: String, _ ctx: inout BehaviourContext) {
        if type == HAPType.targetTemperature || type == HAPType.targetHeatingCooling
            || type == HAPType.currentTemperature
        {
            evaluate(&ctx)
        }
    }

    /// +1 heating, -1 cooling, 0 idle.
    func direction(_ ctx: BehaviourContext) -> Double {
        guard let mode = ctx.number(HAPType.targetHeatingCooling),
            let current = ctx.number(HAPType.currentTemperature),
            let target = ctx.number(HAPType.targetTemperature)
        else { return 0 }
        let tolerance = step / 2
        if (mode == Mode.heat || mode == Mode.auto), current < target - tolerance { return 1 }
        if (mode == Mode.cool || mode == Mode.auto), current > target + tolerance { return -1 }
        return 0
    }

    mutating func evaluate(_ ctx: inout BehaviourContext) {
        let d = direction(ctx)
        ctx.setNumber(HAPType.currentHeatingCooling, d > 0 ? Mode.heat : d < 0 ? Mode.cool : Mode.off)
        if d != 0, !ticking {
            ticking = true
            ctx.schedule(after: every)
        } else if d == 0, ticking {
            ticking = false
            ctx.cancel()
        }
    }

    mutating func fire(tag: Int, _ ctx: inout BehaviourContext) {
        ticking = false
        let d = direction(ctx)
        if d != 0, let current = ctx.number(HAPType.currentTemperature),
            let target = ctx.number(HAPType.targetTemperature)
        {
            let next = d > 0 ? min(target, current + step) : max(target, current - step)
            ctx.setNumber(HAPType.currentTemperature, next)
        }
        evaluate(&ctx)
    }
}

// MARK: - Outlet

struct OutletEngine: BehaviourEngine {
    mutating func didWrite(_ type: String, _ ctx: inout BehaviourContext) {
        guard type == HAPType.on, let on = ctx.value(HAPType.on)?.boolValue,
            let inUse = ctx.characteristic(HAPType.outletInUse), !inUse.metadata.permissions.contains(.write)
        else { return }
        ctx.set(HAPType.outletInUse, .bool(on))
    }
}

// MARK: - Sensors

struct DriftEngine: BehaviourEngine {
    let type: String
    let step: Double
    let every: Double
    let configuredMin: Double?
    let configuredMax: Double?
    var low = 0.0
    var high = 0.0
    var direction = 1.0

    init(type: String, step: Double, every: Double, configuredMin: Double?, configuredMax: Double?) {
        self.type = type
        self.step = abs(step)
        self.every = every
        self.configuredMin = configuredMin
        self.configuredMax = configuredMax
    }

    mutating func start(_ ctx: inout BehaviourContext) {
        guard let c = ctx.characteristic(type), every > 0 else { return }
        let initial = c.value?.doubleValue ?? c.metadata.minValue ?? 0
        low = configuredMin ?? (initial - 10 * step)
        high = configuredMax ?? (initial + 10 * step)
        if let lo = c.metadata.minValue { low = max(low, lo) }
        if let hi = c.metadata.maxValue { high = min(high, hi) }
        ctx.schedule(after: every)
    }

    mutating func fire(tag: Int, _ ctx: inout BehaviourContext) {
        guard let c = ctx.characteristic(type) else { return }
        if c.metadata.format == .bool {
            ctx.set(type, .bool(!(c.value?.boolValue ?? false)))
        } else if let current = c.value?.doubleValue, high > low {
            var next = current + direction * step
            if next > high + 1e-9 || next < low - 1e-9 {
                direction = -direction
                next = current + direction * step
            }
            ctx.setNumber(type, min(high, max(low, next)))
        }
        ctx.schedule(after: every)
    }
}

struct ScriptEngine: BehaviourEngine {
    let type: String
    let steps: [ScriptStep]
    let repeats: Bool
    var index = 0

    init(type: String, steps: [ScriptStep], repeats: Bool) {
        self.type = type
        self.steps = steps
        // A repeating script whose steps all come at once would never let time move on.
        self.repeats = repeats && steps.reduce(0) { $0 + $1.after } > 0
    }

    mutating func start(_ ctx: inout BehaviourContext) {
        guard let first = steps.first else { return }
        ctx.schedule(after: first.after)
    }

    mutating func fire(tag: Int, _ ctx: inout BehaviourContext) {
        guard index < steps.count else { return }
        ctx.set(type, steps[index].value)
        index += 1
        if index == steps.count {
            guard repeats else { return }
            index = 0
        }
        ctx.schedule(after: steps[index].after)
    }
}
