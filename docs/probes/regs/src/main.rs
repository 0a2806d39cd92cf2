//! Register counts of glmw's compute kernels on the first Vulkan device,
//! from the driver's VK_KHR_pipeline_executable_properties statistics
//! (registers, binary size, local and shared memory). Not part of the
//! build: ash is not on the design card, and wgpu does not expose these
//! statistics. NVIDIA's Vulkan driver shows no machine code, so this is
//! the one view of what it made of a kernel (session 24 found
//! attention.wgsl at 128 registers, a spilling variant by its local
//! memory, and the routed matmul pipelines' register cost).
//!
//! Build here: `cargo build --release --offline` in this directory; carry
//! `target/release/regs` and the SPIR-V files build.rs writes for the
//! kernels of interest, `target/release/build/glmw-*/out/<kernel>.<variant>.<N>.spv`
//! (N counts the combinations of the kernel's overrides in
//! build/manifest.rs, the last override fastest), to the GPU machine and
//! run `regs FILE.spv...`. The descriptor set layouts are read from each
//! file's bindings; lavapipe lacks the extension.
use ash::vk;
use std::ffi::CStr;

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    unsafe { run(&files) }
}

unsafe fn run(files: &[String]) {
    let entry = ash::Entry::load().expect("vulkan loader");
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
    let inst = entry
        .create_instance(
            &vk::InstanceCreateInfo::default().application_info(&app),
            None,
        )
        .expect("instance");
    let pd = inst.enumerate_physical_devices().unwrap()[0];
    let props = inst.get_physical_device_properties(pd);
    println!("device: {:?}", CStr::from_ptr(props.device_name.as_ptr()));
    let exts = inst.enumerate_device_extension_properties(pd).unwrap();
    let has = |n: &CStr| {
        exts.iter()
            .any(|e| CStr::from_ptr(e.extension_name.as_ptr()) == n)
    };
    let mut names = vec![ash::khr::pipeline_executable_properties::NAME.as_ptr()];
    let coop = has(ash::khr::cooperative_matrix::NAME);
    if coop {
        names.push(ash::khr::cooperative_matrix::NAME.as_ptr());
    }
    let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
    let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
    let mut f13 = vk::PhysicalDeviceVulkan13Features::default();
    let mut fpe = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
    let mut fcm = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
    let mut f2 = vk::PhysicalDeviceFeatures2::default()
        .push_next(&mut f11)
        .push_next(&mut f12)
        .push_next(&mut f13)
        .push_next(&mut fpe);
    if coop {
        f2 = f2.push_next(&mut fcm);
    }
    inst.get_physical_device_features2(pd, &mut f2);
    let prio = [1.0f32];
    let qci = [vk::DeviceQueueCreateInfo::default()
        .queue_family_index(0)
        .queue_priorities(&prio)];
    let dci = vk::DeviceCreateInfo::default()
        .queue_create_infos(&qci)
        .enabled_extension_names(&names)
        .push_next(&mut f2);
    let dev = inst.create_device(pd, &dci, None).expect("device");
    let pep = ash::khr::pipeline_executable_properties::Device::new(&inst, &dev);
    for f in files {
        let bytes = std::fs::read(f).expect("read spv");
        let words: Vec<u32> = bytes
            .chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        // SPIR-V: OpDecorate (71) DescriptorSet (34) / Binding (33); OpVariable (59) class.
        let (mut set_of, mut bind_of, mut class_of) = (
            std::collections::HashMap::new(),
            std::collections::HashMap::new(),
            std::collections::HashMap::new(),
        );
        let mut ep_name = String::from("main");
        let mut i = 5;
        while i < words.len() {
            let (op, n) = (words[i] & 0xffff, (words[i] >> 16) as usize);
            let w = &words[i..i + n];
            match op {
                71 if w[2] == 34 => {
                    set_of.insert(w[1], w[3]);
                }
                71 if w[2] == 33 => {
                    bind_of.insert(w[1], w[3]);
                }
                59 => {
                    class_of.insert(w[2], w[3]);
                }
                15 => {
                    let bytes: Vec<u8> = w[3..].iter().flat_map(|x| x.to_le_bytes()).collect();
                    ep_name = String::from_utf8_lossy(
                        &bytes[..bytes.iter().position(|&b| b == 0).unwrap()],
                    )
                    .into();
                }
                _ => {}
            }
            i += n.max(1);
        }
        let mut sets: std::collections::BTreeMap<u32, Vec<vk::DescriptorSetLayoutBinding>> =
            Default::default();
        for (id, b) in &bind_of {
            let ty = match class_of.get(id) {
                Some(2) => vk::DescriptorType::UNIFORM_BUFFER,
                Some(12) => vk::DescriptorType::STORAGE_BUFFER,
                _ => continue,
            };
            sets.entry(*set_of.get(id).unwrap_or(&0)).or_default().push(
                vk::DescriptorSetLayoutBinding::default()
                    .binding(*b)
                    .descriptor_type(ty)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE),
            );
        }
        let n_sets = sets.keys().max().map(|m| m + 1).unwrap_or(0);
        let mut layouts = Vec::new();
        for s in 0..n_sets {
            let b = sets.get(&s).cloned().unwrap_or_default();
            layouts.push(
                dev.create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&b),
                    None,
                )
                .unwrap(),
            );
        }
        let pl = dev
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts),
                None,
            )
            .unwrap();
        let sm = dev
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
            .unwrap();
        let name = std::ffi::CString::new(ep_name).unwrap();
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(sm)
            .name(&name);
        let ci = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(pl)
            .flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR)];
        let p = match dev.create_compute_pipelines(vk::PipelineCache::null(), &ci, None) {
            Ok(p) => p[0],
            Err(e) => {
                println!("{f}: pipeline failed {:?}", e.1);
                continue;
            }
        };
        let pi = vk::PipelineInfoKHR::default().pipeline(p);
        let execs = pep.get_pipeline_executable_properties(&pi).unwrap();
        let mut line = format!(
            "{}",
            std::path::Path::new(f)
                .file_name()
                .unwrap()
                .to_string_lossy()
        );
        for i in 0..execs.len() {
            let ei = vk::PipelineExecutableInfoKHR::default()
                .pipeline(p)
                .executable_index(i as u32);
            for s in pep.get_pipeline_executable_statistics(&ei).unwrap() {
                let n = CStr::from_ptr(s.name.as_ptr()).to_string_lossy();
                let v = match s.format {
                    vk::PipelineExecutableStatisticFormatKHR::BOOL32 => format!("{}", s.value.b32),
                    vk::PipelineExecutableStatisticFormatKHR::INT64 => format!("{}", s.value.i64),
                    vk::PipelineExecutableStatisticFormatKHR::UINT64 => format!("{}", s.value.u64),
                    _ => format!("{}", s.value.f64),
                };
                line += &format!(" | {n}={v}");
            }
        }
        println!("{line}");
    }
}
